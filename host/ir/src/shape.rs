//! Shapes as NumPy prints them, for error messages everywhere (host, facade and plugins).

/// `(3, 4)`, `(5,)`, `()`: NumPy's `repr` of a shape.
pub fn tuple(shape: &[u64]) -> String {
    joined(shape, ", ")
}

/// `(3,4)`, `(5,)`, `()`: the form NumPy's broadcasting errors use.
pub fn tuple_compact(shape: &[u64]) -> String {
    joined(shape, ",")
}

fn joined(shape: &[u64], sep: &str) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => {
            let parts: Vec<String> = shape.iter().map(u64::to_string).collect();
            format!("({})", parts.join(sep))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_print_as_numpy_prints_them() {
        assert_eq!(tuple(&[3, 4]), "(3, 4)");
        assert_eq!(tuple(&[5]), "(5,)");
        assert_eq!(tuple(&[]), "()");
        assert_eq!(tuple_compact(&[10, 1]), "(10,1)");
        assert_eq!(tuple_compact(&[8]), "(8,)");
    }
}
