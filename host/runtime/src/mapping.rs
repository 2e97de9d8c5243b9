//! Which process owns each point of a launch.
//!
//! Every point task has one owner. The executor runs the points its process owns; the MPI layer
//! adds only the data movement between owners, derived from the same mapping on every rank.

/// Assigns the points of a launch domain to ranks.
pub trait Mapping: Send + Sync + std::fmt::Debug {
    /// The rank that runs `point` of a launch over `domain`.
    fn owner(&self, point: &[u64], domain: &[u64]) -> usize;

    /// The points of `domain` that `rank` runs, in row-major order. The default tries every
    /// point; a mapping that knows its blocks lists them directly, so that a rank's work
    /// does not grow with the points of other ranks.
    fn points_of(&self, rank: usize, domain: &[u64]) -> Vec<Vec<u64>> {
        crate::partition::points(domain)
            .filter(|p| self.owner(p, domain) == rank)
            .collect()
    }
}

/// Splits the row-major order of a launch's points into `ranks` contiguous blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockMapping {
    /// Number of ranks.
    pub ranks: usize,
}

impl Mapping for BlockMapping {
    fn owner(&self, point: &[u64], domain: &[u64]) -> usize {
        let total: u64 = domain.iter().product();
        if total == 0 || self.ranks <= 1 {
            return 0;
        }
        let mut linear = 0u64;
        for (p, e) in point.iter().zip(domain) {
            linear = linear * e + p;
        }
        ((u128::from(linear) * self.ranks as u128) / u128::from(total)) as usize
    }

    fn points_of(&self, rank: usize, domain: &[u64]) -> Vec<Vec<u64>> {
        let total: u64 = domain.iter().product();
        let ranks = self.ranks.max(1) as u128;
        if rank >= self.ranks.max(1) {
            return Vec::new();
        }
        // owner(l) = floor(l * ranks / total) = rank exactly for
        // ceil(rank * total / ranks) <= l < ceil((rank + 1) * total / ranks).
        let first = |r: u128| (r * u128::from(total)).div_ceil(ranks) as u64;
        let (lo, hi) = if self.ranks <= 1 {
            (0, total)
        } else {
            (first(rank as u128), first(rank as u128 + 1))
        };
        (lo..hi)
            .map(|mut linear| {
                let mut point = vec![0; domain.len()];
                for d in (0..domain.len()).rev() {
                    point[d] = linear % domain[d];
                    linear /= domain[d];
                }
                point
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_contiguous_and_balanced() {
        let m = BlockMapping { ranks: 3 };
        let owners: Vec<usize> = (0..6).map(|p| m.owner(&[p], &[6])).collect();
        assert_eq!(owners, vec![0, 0, 1, 1, 2, 2]);
        assert_eq!(BlockMapping { ranks: 1 }.owner(&[5], &[6]), 0);
        assert_eq!(m.owner(&[], &[]), 0);
    }

    #[test]
    fn a_rank_lists_exactly_the_points_it_owns() {
        for ranks in 1..6 {
            for domain in [vec![7u64], vec![3, 4], vec![2, 0], vec![], vec![5, 1, 3]] {
                let m = BlockMapping { ranks };
                for rank in 0..ranks + 1 {
                    let want: Vec<Vec<u64>> = crate::partition::points(&domain)
                        .filter(|p| m.owner(p, &domain) == rank)
                        .collect();
                    assert_eq!(
                        m.points_of(rank, &domain),
                        want,
                        "{ranks} ranks, {domain:?}"
                    );
                }
            }
        }
    }
}
