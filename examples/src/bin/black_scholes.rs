//! Black-Scholes option pricing (Listing 1 of the Legate task-fusion paper): prices `--n`
//! European call and put options with random stock prices `S` in [5, 30), strikes `X` in
//! [1, 100) and years to expiry `T` in [0.25, 10), risk-free rate `R` = 0.02 and volatility
//! `V` = 0.30 (0-d arrays). See [`weft_examples::black_scholes`].
//!
//! Every iteration prices all options again from the same inputs; the result line reports the
//! median time of one. `--out DIR` writes `S.npy X.npy T.npy R.npy V.npy` (R and V 0-d) and
//! `call.npy put.npy`.

use std::process::ExitCode;

use weft_examples::black_scholes::{self, Cnd};
use weft_examples::{
    AppError, Args, Cli, Kind, Report, bench, load_numeric, out_dir, run_main, save,
};

const NAME: &str = "black_scholes";

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "Prices N European call and put options with Black-Scholes (Listing 1 of the Legate \
         task-fusion paper), op by op on the numeric plugin.",
        1 << 20,
        5,
    )
    .range("n", 1, 1 << 30)
    .help("n", "options to price")
    .help("iters", "timed iterations (each prices every option)")
    .extra(
        "cnd",
        "FORM",
        "the normal CDF: `erf` (exact) or `poly` (the listing's polynomial)",
        Kind::Choice(Cnd::NAMES),
        "erf",
    );
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}

fn run(args: &Args) -> Result<(), AppError> {
    let form_name = args.extra("cnd").unwrap_or("erf");
    let form = Cnd::from_name(form_name).ok_or_else(|| format!("unknown --cnd `{form_name}`"))?;
    let np = load_numeric(args)?;
    let inputs = black_scholes::inputs(&np, args.n, args.seed);
    for a in [&inputs.s, &inputs.x, &inputs.t, &inputs.r, &inputs.v] {
        a.check()?;
    }
    np.runtime(|rt| rt.synchronize())?;

    let (timing, per_iter, last) = bench(&np, args.warmup, args.iters, || {
        let (call, put) = inputs.price(form);
        call.check()?;
        put.check()?;
        Ok((call, put))
    })?;
    let (call, put) = last.ok_or("no iteration ran")?;

    let n = args.n as f64;
    let call_mean = call.sum().item()? / n;
    let put_mean = put.sum().item()? / n;
    if let Some(dir) = out_dir(args)? {
        let i = &inputs;
        for (name, a) in [
            ("S", &i.s),
            ("X", &i.x),
            ("T", &i.t),
            ("R", &i.r),
            ("V", &i.v),
        ] {
            save(&dir, &format!("{name}.npy"), a)?;
        }
        save(&dir, "call.npy", &call)?;
        save(&dir, "put.npy", &put)?;
    }

    let mut report = Report::new(NAME, args);
    report
        .timing(&timing, &per_iter)
        .set("cnd", form_name)
        .set("options_per_second", n / timing.median)
        .set("call_mean", call_mean)
        .set("put_mean", put_mean)
        .runtime_stats(&np);
    args.say(&format!(
        "{NAME}: {} options, cnd={form_name}, {:.3} ms per iteration (median of {}), \
         mean call {call_mean:.6}, mean put {put_mean:.6}",
        args.n,
        timing.median * 1e3,
        args.iters
    ))?;
    report.print()?;
    Ok(())
}
