//! Reads are charged like stores: an application's read of a broadcast view (no storage of
//! its own, so nothing was charged when it was made) is held to the runtime's quota before
//! anything is allocated.

use weft_ir::DType;
use weft_runtime::testing::fake_core;
use weft_runtime::{Error, Limits};

#[test]
fn a_read_of_a_broadcast_past_the_runtime_quota_is_refused_before_allocating() {
    let mut core = fake_core(Limits {
        store_bytes: 1 << 20,
        ..Limits::default()
    });
    let one = core.create_store(vec![1], DType::F64).expect("8 bytes");
    let huge = core
        .view(one, |m| m.broadcast_to(&[1 << 40]))
        .expect("2^40 elements are within the view bound");
    match core.read_bytes(huge) {
        Err(Error::ReadQuota {
            owner,
            bytes,
            quota,
            ..
        }) => {
            assert_eq!(owner, "the runtime");
            assert_eq!(bytes, 8 << 40);
            assert_eq!(quota, 1 << 20);
        }
        other => panic!("expected a quota error, got {other:?}"),
    }
    // Within the quota, a broadcast reads as its repeated element.
    let small = core.view(one, |m| m.broadcast_to(&[4, 2])).expect("a view");
    assert_eq!(core.read_bytes(small).expect("64 bytes"), vec![0; 64]);
    // Past the view bound there is no view to read.
    assert!(
        core.view(one, |m| m.broadcast_to(&[1 << 32, 1 << 32]))
            .is_err()
    );
}
