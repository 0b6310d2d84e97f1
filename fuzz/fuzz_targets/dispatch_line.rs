//! Fuzz target `dispatch_line`: see `remora::fuzzing::dispatch_line` for the properties.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora::fuzzing::dispatch_line(data));
