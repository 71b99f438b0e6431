//! Records libbert's directory (from the bertengine crate) as the binary's rpath.
fn main() {
    let dirs = std::env::var("DEP_BERTENGINE_LIB_DIR").unwrap_or_default();
    for dir in dirs.split(':').filter(|d| !d.is_empty()) {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
