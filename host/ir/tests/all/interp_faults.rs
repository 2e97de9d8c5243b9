//! The reference interpreter's record of an index out of bounds: which parameter, axis,
//! index and extent stopped the run (the words back ends give a faulting gather).

#![allow(clippy::unwrap_used)]

use weft_ir::interp::{Arg, OutOfBounds, Storage, View, run};
use weft_ir::{DType, Scalar, text};

/// `out[i] = a[idx[i]]`, unchecked by the kernel itself.
const GATHER: &str = "
kernel @gather(%arg0: store<f64, 1, read>, %arg1: store<i64, 1, read>, %arg2: store<f64, 1, write>) {
  parallel %arg2 (%0) {
    %1 = load %arg1[%0]
    %2 = load %arg0[%1]
    store %arg2[%0], %2
  }
}
";

fn gather(positions: &[i64]) -> Result<(), weft_ir::interp::InterpError> {
    let kernel = text::parse(GATHER).unwrap();
    let n = positions.len();
    let mut storages = vec![
        Storage {
            dtype: DType::F64,
            data: (0..5).map(|i| Scalar::F64(i as f64)).collect(),
        },
        Storage {
            dtype: DType::I64,
            data: positions.iter().map(|&p| Scalar::I64(p)).collect(),
        },
        Storage::zeros(DType::F64, n),
    ];
    let args = [
        Arg::Store(View::dense(0, &[5])),
        Arg::Store(View::dense(1, &[n as i64])),
        Arg::Store(View::dense(2, &[n as i64])),
    ];
    run(&kernel, &args, &mut storages)
}

#[test]
fn an_index_out_of_bounds_is_recorded_with_its_axis_and_size() {
    assert!(gather(&[0, 4, 2]).is_ok());
    for (positions, index) in [(&[1i64, 7, 9][..], 7), (&[3, -2][..], -2)] {
        let e = gather(positions).unwrap_err();
        let want = OutOfBounds {
            param: 0,
            axis: 0,
            index,
            size: 5,
        };
        assert_eq!(e.out_of_bounds, Some(want), "{e}");
        assert!(
            e.message.contains(&format!(
                "index {index} is out of bounds for axis 0 with size 5"
            )),
            "{e}"
        );
    }
}
