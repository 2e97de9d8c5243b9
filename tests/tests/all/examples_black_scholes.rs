//! The Black-Scholes example (`weft_examples::black_scholes`) through the real host and the
//! numeric plugin, against the plain-Rust reference (`weft_tests::reference`), which has its
//! own `erf` and its own loop.
//!
//! Tolerance: `|got - want| <= 1e-9 + 1e-9 * |want|` per price. Prices are below 100 and both
//! sides compute in f64, so they differ only by rounding (a few 1e-14); a wrong operation or a
//! broadcasting bug gives errors of 1e-3 or more.

use weft::{Array, Numeric};
use weft_examples::black_scholes::{
    self, Cnd, Inputs, RISK_FREE, S_RANGE, T_RANGE, VOLATILITY, X_RANGE,
};
use weft_ir::DType;
use weft_tests::{assert_close, numeric, reference};

const RTOL: f64 = 1e-9;
const ATOL: f64 = 1e-9;

fn read(a: &Array) -> Vec<f64> {
    a.to_vec().expect("the array reads back")
}

/// Prices `inputs` with Weft and with the reference, and compares call and put.
fn check_against_reference(inputs: &Inputs, form: Cnd, what: &str) -> (Vec<f64>, Vec<f64>) {
    let (call, put) = inputs.price(form);
    let (s, x, t) = (read(&inputs.s), read(&inputs.x), read(&inputs.t));
    let (r, v) = (
        inputs.r.item().expect("R is one value"),
        inputs.v.item().expect("V is one value"),
    );
    let n = s.len() as u64;
    assert_eq!(call.shape().expect("shape"), vec![n], "{what}: call shape");
    assert_eq!(put.shape().expect("shape"), vec![n], "{what}: put shape");
    assert_eq!(call.dtype().expect("dtype"), DType::F64);
    let (want_call, want_put) = reference::black_scholes(&s, &x, &t, r, v, form == Cnd::Polynomial);
    let (call, put) = (read(&call), read(&put));
    assert_close(&format!("{what}: call"), &call, &want_call, RTOL, ATOL);
    assert_close(&format!("{what}: put"), &put, &want_put, RTOL, ATOL);
    // Put-call parity: call - put = S - X exp(-R T), whatever the CDF's form.
    for i in 0..s.len() {
        let parity = s[i] - x[i] * (-r * t[i]).exp();
        assert!(
            (call[i] - put[i] - parity).abs() <= 1e-9 * (s[i] + x[i]),
            "{what}: parity broken at [{i}]: call {} put {} want difference {parity}",
            call[i],
            put[i]
        );
    }
    (call, put)
}

fn in_range(values: &[f64], (low, high): (f64, f64), what: &str) {
    assert!(
        values.iter().all(|&v| (low..high).contains(&v)),
        "{what} outside [{low}, {high})"
    );
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let mid = 0.5 * (low + high);
    assert!(
        (mean - mid).abs() < 0.1 * (high - low),
        "{what}: mean {mean} far from {mid}; not uniform?"
    );
}

#[test]
fn random_inputs_have_the_documented_ranges_and_scalars() {
    let np = numeric(1);
    let inputs = black_scholes::inputs(&np, 4096, 11);
    in_range(&read(&inputs.s), S_RANGE, "S");
    in_range(&read(&inputs.x), X_RANGE, "X");
    in_range(&read(&inputs.t), T_RANGE, "T");
    for (a, value) in [(&inputs.r, RISK_FREE), (&inputs.v, VOLATILITY)] {
        assert_eq!(
            a.shape().expect("shape"),
            Vec::<u64>::new(),
            "R and V are 0-d"
        );
        assert_eq!(a.item().expect("one value"), value);
    }
    // S, X and T come from different streams, and another seed gives other inputs.
    assert_ne!(read(&inputs.s)[..8], read(&inputs.t)[..8]);
    let other = black_scholes::inputs(&np, 4096, 12);
    assert_ne!(read(&inputs.s), read(&other.s));
}

#[test]
fn erf_form_matches_the_reference() {
    let np = numeric(1);
    let inputs = black_scholes::inputs(&np, 1000, 7);
    check_against_reference(&inputs, Cnd::Erf, "erf, n=1000");
}

#[test]
fn polynomial_form_matches_the_reference() {
    let np = numeric(1);
    let inputs = black_scholes::inputs(&np, 1000, 7);
    check_against_reference(&inputs, Cnd::Polynomial, "poly, n=1000");
}

#[test]
fn the_two_forms_differ_only_by_the_polynomials_error() {
    let np = numeric(1);
    let inputs = black_scholes::inputs(&np, 2000, 3);
    let (erf_call, erf_put) = inputs.price(Cnd::Erf);
    let (poly_call, poly_put) = inputs.price(Cnd::Polynomial);
    let (s, x) = (read(&inputs.s), read(&inputs.x));
    for (e, p, what) in [
        (read(&erf_call), read(&poly_call), "call"),
        (read(&erf_put), read(&poly_put), "put"),
    ] {
        for i in 0..s.len() {
            // |cnd_poly - cnd_erf| < 7.5e-8 for each of the two CDF values.
            let bound = 7.5e-8 * (s[i] + x[i]) + 1e-12;
            assert!(
                (e[i] - p[i]).abs() <= bound,
                "{what}[{i}]: {} vs {}",
                e[i],
                p[i]
            );
        }
    }
}

/// Options chosen by hand: at the money, deep in and out of the money, very short and long
/// expiries, so that `d` takes both signs and large magnitudes (the `where` branch of the
/// polynomial form and erf's tails).
fn hand_picked(np: &Numeric, r: f64, v: f64) -> Inputs {
    let s = [
        5.0, 10.0, 30.0, 30.0, 20.0, 29.9, 5.0, 17.5, 1.0, 100.0, 42.0,
    ];
    let x = [
        100.0, 10.0, 1.0, 29.0, 20.0, 30.0, 5.0, 17.5, 100.0, 1.0, 42.0,
    ];
    let t = [
        0.25, 1.0, 10.0, 0.25, 0.01, 0.5, 9.99, 2.0, 0.25, 0.25, 1e-6,
    ];
    let n = s.len() as u64;
    Inputs {
        s: np.from_vec(&[n], &s),
        x: np.from_vec(&[n], &x),
        t: np.from_vec(&[n], &t),
        r: np.full(&[], r, DType::F64),
        v: np.full(&[], v, DType::F64),
    }
}

#[test]
fn hand_picked_options_match_the_reference() {
    let np = numeric(1);
    for (r, v) in [
        (RISK_FREE, VOLATILITY),
        (0.1, 0.2),
        (0.0, 0.05),
        (0.07, 0.9),
    ] {
        let inputs = hand_picked(&np, r, v);
        for form in [Cnd::Erf, Cnd::Polynomial] {
            check_against_reference(
                &inputs,
                form,
                &format!("hand-picked, R={r}, V={v}, {form:?}"),
            );
        }
    }
}

#[test]
fn a_known_textbook_price() {
    // S = X = 100, T = 1, R = 0.05, V = 0.2: call 10.4506, put 5.5735.
    let np = numeric(1);
    let inputs = Inputs {
        s: np.from_vec(&[1], &[100.0]),
        x: np.from_vec(&[1], &[100.0]),
        t: np.from_vec(&[1], &[1.0]),
        r: np.full(&[], 0.05, DType::F64),
        v: np.full(&[], 0.2, DType::F64),
    };
    let (call, put) = inputs.price(Cnd::Erf);
    assert!((call.item().expect("call") - 10.450_583_572_185_565).abs() < 1e-9);
    assert!((put.item().expect("put") - 5.573_526_022_256_971).abs() < 1e-9);
}

#[test]
fn results_do_not_depend_on_partitioning() {
    let one = numeric(1);
    let four = numeric(4);
    let a = black_scholes::inputs(&one, 1001, 5);
    let b = black_scholes::inputs(&four, 1001, 5);
    assert_eq!(
        read(&a.s),
        read(&b.s),
        "the same seed gives the same S on 4 pieces"
    );
    let (call1, put1) = check_against_reference(&a, Cnd::Erf, "1 piece");
    let (call4, put4) = check_against_reference(&b, Cnd::Erf, "4 pieces");
    assert_close("call, 4 pieces vs 1", &call4, &call1, 1e-14, 1e-14);
    assert_close("put, 4 pieces vs 1", &put4, &put1, 1e-14, 1e-14);
}

#[test]
fn repeated_pricing_is_stable_and_compiles_nothing_new() {
    let np = numeric(1);
    let inputs = black_scholes::inputs(&np, 512, 9);
    let (first, _) = inputs.price(Cnd::Erf);
    let first = read(&first);
    let mut compiled = 0;
    for i in 0..5 {
        let (call, put) = inputs.price(Cnd::Erf);
        np.runtime(|rt| rt.flush()).expect("flush");
        assert_eq!(read(&call), first);
        put.check().expect("put is healthy");
        // Two iterations of the loop's own pattern warm it up; after that, nothing compiles.
        if i == 1 {
            compiled = np.runtime(|rt| rt.stats().exec.kernels_compiled);
        }
    }
    let after = np.runtime(|rt| rt.stats().exec.kernels_compiled);
    assert_eq!(after, compiled, "a steady-state loop compiles nothing");
}

#[test]
fn mismatched_inputs_give_an_error_not_a_panic() {
    let np = numeric(1);
    let mut inputs = black_scholes::inputs(&np, 16, 1);
    inputs.x = np.from_vec(&[3], &[1.0, 2.0, 3.0]);
    let (call, put) = inputs.price(Cnd::Erf);
    assert!(call.check().is_err(), "S (16) / X (3) must fail");
    assert!(put.to_vec().is_err());
}
