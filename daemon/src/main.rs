//! The `remora` binary: everything lives in the library; see `cli`.

fn main() {
    std::process::exit(remora::cli::main());
}
