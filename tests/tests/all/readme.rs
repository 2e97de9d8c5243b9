//! The README's application and tenant examples, run against plain-Rust references. The
//! README shows them as excerpts of this file, which `sdk/build/tests/guide.rs` checks.

use std::time::Duration;

/// The README's application example; returns `sum(sqrt(x^2 + 1))` over a linspace and
/// `p . (A p)` for the 1000x1000-grid Poisson matrix and `p` all ones.
fn application() -> weft::Result<(f64, f64)> {
    use weft::{Config, DType, Numeric, Runtime, Sparse};

    let rt = Runtime::new(Config::from_env())?;
    let np = Numeric::new(rt, weft_plugin_artifacts::NUMERIC)?;
    let x = np.linspace(0.0, 1.0, 1_000_000, DType::F64);
    let y = (&x * &x + 1.0).sqrt(); // tasks go to the window; nothing runs yet
    let total = y.sum().item()?; // reading a value runs what it needs: one fused loop

    let sp = Sparse::new(&np, weft_plugin_artifacts::SPARSE)?; // same window, fuses with numeric
    let a = sp.poisson2d(1000, DType::F64, DType::I32)?;
    let p = np.ones(&[1000 * 1000], DType::F64);
    let pq = p.dot(&a.matvec(&p)).item()?; // the product and the dot product in one loop
    Ok((total, pq))
}

#[test]
fn the_readmes_application_computes_what_it_says() {
    let (total, pq) = application().expect("the README's example runs");
    let n = 1_000_000;
    let reference: f64 = (0..n)
        .map(|i| {
            let x = i as f64 / (n - 1) as f64;
            (x * x + 1.0).sqrt()
        })
        .sum();
    assert!(
        (total - reference).abs() <= 1e-9 * reference,
        "{total} against {reference}"
    );
    // The 5-point Poisson matrix (4 on the diagonal, -1 to each neighbour): each row of
    // A 1 is 4 minus the cell's number of neighbours, so p . (A p) is 4 g^2 minus twice the
    // grid's 2 g (g - 1) edges: 4 g.
    let g = 1000.0;
    assert_eq!(pq, 4.0 * g, "p . (A p) over the grid's boundary");
}

/// The README's tenant example: a runtime with its own quota and kernel time limit over a
/// shared pool.
fn tenant(pool: &weft::WorkerPool) -> weft::Result<weft::Runtime> {
    use weft::{Config, Limits, Runtime};

    let config = Config {
        pool: Some(pool.clone()), // a weft::WorkerPool that tenants share
        limits: Limits {
            store_bytes: 1 << 30,
            kernel_time: Some(Duration::from_secs(5)),
            ..Limits::default()
        },
        ..Config::from_env()
    };
    let tenant = Runtime::new(config)?;
    Ok(tenant)
}

#[test]
fn the_readmes_tenants_share_a_pool_and_keep_their_quota() {
    let pool = weft::WorkerPool::new(2).expect("a pool");
    let alone = pool.sharers();
    let a = tenant(&pool).expect("tenant a starts");
    let per_tenant = pool.sharers() - alone;
    assert!(per_tenant > 0, "a tenant runs on the pool it was given");
    let b = tenant(&pool).expect("tenant b starts");
    assert_eq!(
        pool.sharers(),
        alone + 2 * per_tenant,
        "both tenants run on the one pool"
    );
    {
        let np = weft::Numeric::new(a, weft_plugin_artifacts::NUMERIC).expect("numeric loads");
        let big = np.zeros(&[(1 << 30) / 8 + 1], weft::DType::F64);
        let err = big
            .sum()
            .item()
            .expect_err("a store past the quota is refused");
        assert!(err.to_string().contains("quota"), "{err}");
    }
    drop(b);
    assert_eq!(pool.sharers(), alone, "both tenants gave the pool back");
}
