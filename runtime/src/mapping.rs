//! Which process owns each point of a launch.
//!
//! Every point task has one owner. The executor runs the points its process owns; the MPI layer
//! adds only the data movement between owners, derived from the same mapping on every rank.

/// Assigns the points of a launch domain to ranks.
pub trait Mapping: Send + Sync + std::fmt::Debug {
    /// The rank that runs `point` of a launch over `domain`.
    fn owner(&self, point: &[u64], domain: &[u64]) -> usize;
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
}
