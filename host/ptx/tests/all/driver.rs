//! Starting the GPU back end: where no NVIDIA driver is, a clear error naming the missing
//! library and no panic; where one is, a device.

#[test]
fn starting_names_the_missing_driver_or_opens_the_device() {
    match weft_ptx::PtxBackend::new(0) {
        Err(weft_ptx::Error::NoDriver(message)) => {
            assert!(!weft_ptx::driver::present());
            assert!(message.contains("libcuda.so.1"), "{message}");
        }
        Ok(backend) => {
            assert!(weft_ptx::driver::present());
            let name = backend.device_name().expect("the device has a name");
            assert!(!name.is_empty());
        }
        Err(e) => panic!("unexpected error starting the GPU back end: {e}"),
    }
}
