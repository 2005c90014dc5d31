//! Build scripts run when cargo builds the harness: `ROGUE_BUILD_MARK`
//! names a file this one writes, so a test sees whether a build ran;
//! `ROGUE_MODE=build-sleep` makes the build slow.
fn main() {
    println!("cargo:rerun-if-env-changed=ROGUE_BUILD_MARK");
    println!("cargo:rerun-if-env-changed=ROGUE_MODE");
    if let Some(mark) = std::env::var_os("ROGUE_BUILD_MARK") {
        std::fs::write(mark, "the build script ran\n").unwrap();
    }
    if std::env::var("ROGUE_MODE").as_deref() == Ok("build-sleep") {
        std::thread::sleep(std::time::Duration::from_secs(3));
        if let Some(late) = std::env::var_os("ROGUE_LATE") {
            std::fs::write(late, "written by the build after gate stopped\n").unwrap();
        }
    }
}
