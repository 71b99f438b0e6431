//! Gives this crate's tests, examples and binaries an rpath to libbert's directory (found by
//! bertengine-sys's build script), so they run without LD_LIBRARY_PATH, and passes the
//! directory on to dependents' build scripts as DEP_BERTENGINE_LIB_DIR.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_BERT_LIB_DIR");
    let dirs = std::env::var("DEP_BERT_LIB_DIR").unwrap_or_default();
    for dir in dirs.split(':').filter(|d| !d.is_empty()) {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    println!("cargo:lib_dir={dirs}");
}
