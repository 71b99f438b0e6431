//! Locates libbert (BERT_LIB_DIR, else the `pkg-config` program with package "bert") and
//! hands its path to the crate (BERTENGINE_SYS_LIB_PATH), which loads it on first use, so
//! nothing is linked here and dependents' programs need no rpath. When a C compiler (`cc`, or
//! $CC) and bert.h are available it also compiles shim/layout.c, which the layout test links
//! to compare struct sizes and offsets with C's.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn pkg_config(args: &[&str]) -> Option<String> {
    let out = Command::new("pkg-config")
        .args(args)
        .arg("bert")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn flag_dirs(flags: &str, prefix: &str) -> Vec<PathBuf> {
    flags
        .split_whitespace()
        .filter_map(|f| f.strip_prefix(prefix))
        .map(PathBuf::from)
        .collect()
}

fn main() {
    println!("cargo:rerun-if-env-changed=BERT_LIB_DIR");
    println!("cargo:rerun-if-env-changed=BERT_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=shim/layout.c");
    println!("cargo::rustc-check-cfg=cfg(bert_layout_shim)");

    // BERT_LIB_DIR, else pkg-config's -L directories, then this source tree's meson build
    // directory `build`; without any, the loader's search path at run time.
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let mut lib_dirs = match env::var("BERT_LIB_DIR") {
        Ok(dir) if !dir.is_empty() => vec![PathBuf::from(dir)],
        _ => pkg_config(&["--libs-only-L"])
            .map(|flags| flag_dirs(&flags, "-L"))
            .unwrap_or_default(),
    };
    lib_dirs.push(manifest.join("../../../build"));
    let library = lib_dirs
        .iter()
        .map(|d| d.join("libbert.so.1"))
        .find(|p| p.is_file());
    match &library {
        Some(path) => {
            // An absolute directory, and the soname link itself (it follows the library's version).
            let dir = path.parent().unwrap().canonicalize().unwrap();
            let path = dir.join("libbert.so.1");
            println!("cargo:rustc-env=BERTENGINE_SYS_LIB_PATH={}", path.display());
        }
        None => {
            println!("cargo:warning=libbert.so.1 not found in {lib_dirs:?} (set BERT_LIB_DIR or make `pkg-config bert` work): programs will look for it on the loader's path");
            println!("cargo:rustc-env=BERTENGINE_SYS_LIB_PATH=libbert.so.1");
            // Look again once the library has been built.
            for dir in &lib_dirs {
                println!(
                    "cargo:rerun-if-changed={}",
                    dir.join("libbert.so.1").display()
                );
            }
        }
    }

    // Header directories for the layout shim: BERT_INCLUDE_DIR, pkg-config, the source tree.
    let mut inc: Vec<PathBuf> = Vec::new();
    if let Ok(dir) = env::var("BERT_INCLUDE_DIR") {
        inc.push(PathBuf::from(dir));
    }
    if let Some(flags) = pkg_config(&["--cflags-only-I"]) {
        inc.extend(flag_dirs(&flags, "-I"));
    }
    inc.push(manifest.join("../../../capi"));
    let Some(header_dir) = inc.into_iter().find(|d| d.join("bert.h").is_file()) else {
        println!("cargo:warning=bert.h not found (set BERT_INCLUDE_DIR): the struct layout test is skipped");
        return;
    };
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("bert_layout_shim.o");
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args(["-std=c99", "-c", "-fPIC", "-o"])
        .arg(&out)
        .arg("-I")
        .arg(&header_dir)
        .arg(manifest.join("shim/layout.c"))
        .status();
    match status {
        Ok(s) if s.success() && Path::new(&out).exists() => {
            println!("cargo:rustc-cfg=bert_layout_shim");
            println!("cargo:rustc-link-arg-tests={}", out.display());
        }
        _ => println!("cargo:warning=could not compile shim/layout.c with `{cc}`: the struct layout test is skipped"),
    }
}
