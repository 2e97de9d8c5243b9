//! The device-side canonical tree ([`weft_ptx::tree`]): its level kernels, run in the
//! reference interpreter with the bindings the launcher gives them, leave at the planned
//! positions exactly the nodes `weft_ir::reduction::aligned_nodes` computes, bit for bit; and
//! the level kernels assemble with `ptxas`.

use proptest::prelude::*;
use weft_ir::interp::{Arg, Storage, View, run};
use weft_ir::reduction::{DenseShape, Partial, aligned_nodes, dense_nodes};
use weft_ir::{DType, ReduceOp, Scalar, ValidKernel};
use weft_ptx::tree::{LevelStep, level_kernel, plan, plan_rows};

fn device_nodes(s: u64, values: &[f64], op: ReduceOp) -> Vec<(u32, u64, u64)> {
    let kernel = level_kernel(op, DType::F64).expect("the level kernel parses");
    let mut storages = vec![Storage {
        dtype: DType::F64,
        data: values.iter().map(|&v| Scalar::F64(v)).collect(),
    }];
    let (steps, nodes) = plan(s, values.len() as u64);
    run_steps(&kernel, &steps, &mut storages);
    nodes
        .iter()
        .map(|n| {
            let Scalar::F64(v) = storages[0].data[n.local as usize] else {
                panic!("not an f64")
            };
            (n.level, n.index, v.to_bits())
        })
        .collect()
}

/// Runs the level kernel's steps in the interpreter, with the views the launcher binds.
fn run_steps(kernel: &weft_ir::Kernel, steps: &[LevelStep], storages: &mut [Storage]) {
    for step in steps {
        let view = |offset: u64| View {
            storage: 0,
            offset: offset as i64,
            strides: vec![step.line_stride as i64, step.stride as i64],
            extents: vec![step.lines as i64, step.count as i64],
            origin: vec![0, 0],
        };
        let args = [
            Arg::Store(view(step.offset)),
            Arg::Store(view(step.offset + step.right)),
        ];
        run(kernel, &args, storages).expect("a level runs");
    }
}

/// A rank-2 loop's leaves (rows `s0..`, whole lines of `width`) through the device plan and
/// through `dense_nodes`: the same partial.
fn rows_agree(s0: u64, width: u64, values: &[f64], op: ReduceOp) {
    let rows = values.len() as u64 / width;
    let values = &values[..(rows * width) as usize];
    let view = [s0 + rows + 3, width];
    let f = if op == ReduceOp::Prod {
        |a: f64, b: f64| a * b
    } else {
        |a: f64, b: f64| a + b
    };
    let kernel = level_kernel(op, DType::F64).expect("the level kernel parses");
    let mut storages = vec![Storage {
        dtype: DType::F64,
        data: values.iter().map(|&v| Scalar::F64(v)).collect(),
    }];
    let (steps, nodes) = plan_rows(s0, rows, width);
    run_steps(&kernel, &steps, &mut storages);
    let mut device = Partial::new(op, DType::F64, &view);
    for n in nodes {
        device
            .add_node(&[], n.level, n.index, storages[0].data[n.local as usize])
            .expect("a device node fits");
    }
    let mut host = Partial::new(op, DType::F64, &view);
    let extents = [rows as i64, width as i64];
    let origin = [s0 as i64, 0];
    let shape = DenseShape {
        lo: 0,
        hi: rows as i64,
        extents: &extents,
        origin: &origin,
        view: &view,
    };
    dense_nodes(&mut values.to_vec(), &shape, &mut host, f, Scalar::F64).expect("host nodes");
    assert_eq!(device, host, "s0 {s0} rows {rows} width {width}");
}

fn host_nodes(s: u64, values: &[f64], op: ReduceOp) -> Vec<(u32, u64, u64)> {
    let mut v = values.to_vec();
    let mut out = Vec::new();
    let f = if op == ReduceOp::Prod {
        |a: f64, b: f64| a * b
    } else {
        |a: f64, b: f64| a + b
    };
    aligned_nodes(s, &mut v, f, |level, index, x| {
        out.push((level, index, x.to_bits()))
    });
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn rows_spanning_the_view_reduce_as_dense_nodes_does(
        s0 in 0u64..40,
        width in 1u64..40,
        values in proptest::collection::vec(-1e3f64..1e3, 40..600),
        prod in any::<bool>(),
    ) {
        let op = if prod { ReduceOp::Prod } else { ReduceOp::Sum };
        rows_agree(s0, width, &values, op);
    }

    #[test]
    fn device_levels_leave_the_canonical_nodes(
        s in 0u64..5000,
        values in proptest::collection::vec(-1e3f64..1e3, 1..700),
        prod in any::<bool>(),
    ) {
        let op = if prod { ReduceOp::Prod } else { ReduceOp::Sum };
        prop_assert_eq!(device_nodes(s, &values, op), host_nodes(s, &values, op));
    }
}

#[test]
fn level_kernels_assemble() {
    for op in [ReduceOp::Sum, ReduceOp::Prod] {
        for dtype in [DType::F32, DType::F64] {
            let k = level_kernel(op, dtype).expect("parses");
            let name = k.name.clone();
            let module = weft_ptx::emit(&ValidKernel::new(k).expect("validates")).expect("emits");
            weft_ptx::ptxas::assemble(&module.text, "sm_90", &name).expect("assembles");
        }
    }
}
