//! Arrays to and from `ndarray` (the `weft` crate's `ndarray` feature): every dtype round
//! trips with its shape, `ndarray` arrays of any layout arrive in their logical order, a
//! computation on a converted array equals `ndarray`'s own, and a dtype that does not match
//! is an error that says so.

use ndarray::{Array, ArrayD, IxDyn, s};
use weft::Element;

fn round_trip<T: Element + PartialEq + std::fmt::Debug>(values: impl Fn(usize) -> T) {
    let np = weft_tests::numeric(1);
    for shape in [vec![], vec![5], vec![3, 4], vec![2, 3, 5]] {
        let len: usize = shape.iter().product();
        let a = ArrayD::from_shape_vec(IxDyn(&shape), (0..len).map(&values).collect())
            .expect("a shape that fits");
        let w = np.from_ndarray(&a);
        let back: ArrayD<T> = w.to_ndarray().expect("reads back");
        assert_eq!(back, a, "shape {shape:?}");
        let dims: Vec<u64> = shape.iter().map(|&e| e as u64).collect();
        assert_eq!(w.shape().expect("a shape"), dims);
    }
}

#[test]
fn every_dtype_round_trips_with_its_shape() {
    round_trip(|i| i as f64 * 0.5 - 3.25);
    round_trip(|i| i as f32 * 0.25 + 1.5);
    round_trip(|i| i as i64 * 7 - 40);
    round_trip(|i| i as i32 * -3 + 11);
    round_trip(|i| i % 3 == 1);
}

#[test]
fn arrays_of_any_layout_arrive_in_their_logical_order() {
    let np = weft_tests::numeric(1);
    let a = Array::from_shape_fn((4, 6), |(i, j)| (10 * i + j) as f64);
    // A transpose and a strided, reversed slice: neither is contiguous in row-major order.
    let t = a.t();
    let strided = a.slice(s![..;2, ..;-3]);
    for view in [t.into_dyn(), strided.into_dyn()] {
        assert!(
            view.as_slice().is_none(),
            "the view is not in standard layout"
        );
        let w = np.from_ndarray(&view);
        let want: Vec<f64> = view.iter().copied().collect();
        assert_eq!(w.to_vec_of::<f64>().expect("reads"), want);
        let back: ArrayD<f64> = w.to_ndarray().expect("reads back");
        assert_eq!(back, view.to_owned());
    }
}

#[test]
fn a_computation_on_a_converted_array_equals_ndarrays_own() {
    let np = weft_tests::numeric(2);
    let a = Array::from_shape_fn((37, 11), |(i, j)| ((i * 11 + j) as f64).sin());
    let b = Array::from_shape_fn(11, |j| 1.0 + j as f64 / 8.0);
    let w = (np.from_ndarray(&a) * 2.0 + np.from_ndarray(&b)).exp();
    let got: ArrayD<f64> = w.to_ndarray().expect("computes");
    // ndarray's own broadcasting and `exp`; Weft's `exp` is within a few ulps of the system's.
    let want = (&a * 2.0 + &b).mapv(f64::exp).into_dyn();
    assert_eq!(got.shape(), want.shape());
    for (x, y) in got.iter().zip(want.iter()) {
        assert!(
            (x - y).abs() <= 4.0 * f64::EPSILON * y.abs(),
            "{x} against {y}"
        );
    }
}

#[test]
fn a_dtype_that_does_not_match_is_an_error_that_says_so() {
    let np = weft_tests::numeric(1);
    let a = np.from_ndarray(&Array::from_vec(vec![1.0f64, 2.0]));
    let err = a.to_ndarray::<i64>().expect_err("f64 is not i64");
    let text = err.to_string();
    assert!(text.contains("holds f64, not i64"), "{text}");
    // The host keeps running: the array still reads as what it holds.
    assert_eq!(
        a.to_ndarray::<f64>().expect("reads").as_slice(),
        Some(&[1.0, 2.0][..])
    );
}
