//! Embeds `templates/` and `static/` into the binary so Arbor ships as one file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into()));
    let mut code = String::new();
    for (dir, kind) in [("templates", "TEMPLATES"), ("static", "STATIC_FILES")] {
        let base = root.join(dir);
        println!("cargo:rerun-if-changed={}", base.display());
        let mut files = Vec::new();
        walk(&base, &mut files);
        let _ = writeln!(code, "/// Files under `{dir}/`: (relative path, contents, sha256 prefix).");
        let _ = writeln!(code, "pub static {kind}: &[(&str, &[u8], &str)] = &[");
        for file in files {
            let rel = file.strip_prefix(&base).unwrap_or(&file).to_string_lossy().replace('\\', "/");
            let bytes = std::fs::read(&file).unwrap_or_default();
            let hash: String = Sha256::digest(&bytes).iter().take(8).map(|b| format!("{b:02x}")).collect();
            println!("cargo:rerun-if-changed={}", file.display());
            let _ =
                writeln!(code, "    ({rel:?}, include_bytes!({:?}), {hash:?}),", file.display().to_string());
        }
        let _ = writeln!(code, "];");
    }
    link_in_code_order(&root);
    pack_relative_relocations();
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into())).join("assets.rs");
    if let Err(e) = std::fs::write(&out, code) {
        panic!("cannot write {}: {e}", out.display());
    }
}

/// Lays the server's code out in the order `scripts/code-order` measured: the functions an idle
/// server runs first, then the ones its everyday work runs. Linux maps 64 KiB around every
/// first-run function, so code that runs together and lies together keeps resident memory
/// small (BENCHMARKS.md, "Code laid out by use"). Only optimised builds for x86_64 Linux, where
/// rustc links with lld; a symbol the list names that no longer exists is skipped.
/// `ARBOR_CODE_ORDER=off` leaves the linker's own order (for a linker without the option).
fn link_in_code_order(root: &Path) {
    let order = root.join("link").join("code-order.txt");
    println!("cargo:rerun-if-changed={}", order.display());
    println!("cargo:rerun-if-env-changed=ARBOR_CODE_ORDER");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let wanted = var("TARGET") == "x86_64-unknown-linux-gnu"
        && var("PROFILE") == "release"
        && var("ARBOR_CODE_ORDER") != "off"
        && order.is_file();
    if wanted {
        println!("cargo:rustc-link-arg-bin=arbor=-Wl,--symbol-ordering-file={}", order.display());
        println!("cargo:rustc-link-arg-bin=arbor=-Wl,--no-warn-symbol-ordering");
    }
}

/// Links the server with its relative relocations packed (`DT_RELR`): the dynamic loader reads
/// every relocation at start, and the 2 MiB table of the usual format then stays mapped for the
/// life of the process; packed, it is a few KiB (BENCHMARKS.md, step 19). The loader must know
/// the format: glibc 2.36 and later (Debian 12, as in the image; the binary names the
/// requirement, so an older glibc refuses it at start rather than misloading it). Only when the
/// glibc of the build host, which the binary is linked against, is that recent, and only on
/// x86_64 Linux, where rustc links with lld (debug builds too, so the test suite runs it).
fn pack_relative_relocations() {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let version = std::process::Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default();
    let recent = version
        .trim()
        .strip_prefix("glibc ")
        .and_then(|v| {
            let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
            Some((parts.next()??, parts.next()??))
        })
        .is_some_and(|v| v >= (2, 36));
    if var("TARGET") == "x86_64-unknown-linux-gnu" && recent {
        println!("cargo:rustc-link-arg-bin=arbor=-Wl,-z,pack-relative-relocs");
    }
}
