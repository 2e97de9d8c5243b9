//! `kernel_write` over inputs from a fixed pseudo-random stream: none may fail its checks,
//! and most must build kernels the validator accepts and runs that complete, so that the
//! target reaches the compiled code (`WEFT_FUZZ_WRITE_INPUTS` sets how many; default 150).

use weft_fuzz::WriteOutcome;

#[test]
fn random_inputs_mostly_run() {
    let n: usize = std::env::var("WEFT_FUZZ_WRITE_INPUTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut tally = [0usize; 4];
    for k in 0..n {
        let len = 64 + k % 192;
        let data: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        if std::env::var_os("WEFT_FUZZ_WRITE_DUMP").is_some() {
            let dir = std::env::temp_dir().join("kernel_write_inputs");
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::write(dir.join(format!("{k}")), &data);
        }
        let outcome = weft_fuzz::kernel_write(&data);
        tally[match outcome {
            WriteOutcome::Refused => 0,
            WriteOutcome::Failed => 1,
            WriteOutcome::Lenient => 2,
            WriteOutcome::Compared => 3,
        }] += 1;
    }
    eprintln!(
        "kernel_write over {n} inputs: {} refused, {} failed on every core, {} lenient, {} compared",
        tally[0], tally[1], tally[2], tally[3]
    );
    assert!(
        tally[0] * 10 <= n,
        "the validator refused {} of {n}",
        tally[0]
    );
    assert!(tally[3] * 3 >= n, "only {} of {n} runs compared", tally[3]);
}
