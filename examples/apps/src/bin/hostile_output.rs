//! A hostile application for the host's tests: it writes to standard output for ever.

use std::io::Write;

fn main() {
    let line = [b'x'; 1023];
    let mut out = std::io::stdout().lock();
    loop {
        if out
            .write_all(&line)
            .and_then(|()| out.write_all(b"\n"))
            .is_err()
        {
            // The host refused the write: stop with that as the error.
            std::process::exit(3);
        }
    }
}
