//! Build scripts run when cargo builds the harness: `ROGUE_BUILD_MARK`
//! names a file this one writes, so a test sees whether a build ran;
//! `ROGUE_MODE=build-sleep` makes the build slow; `ROGUE_ENV_OUT` names a
//! folder where it records its environment (`build.env`); `ROGUE_SAY_FILE`
//! a file whose text it prints as a cargo warning.
fn main() {
    println!("cargo:rerun-if-env-changed=ROGUE_BUILD_MARK");
    println!("cargo:rerun-if-env-changed=ROGUE_MODE");
    println!("cargo:rerun-if-env-changed=ROGUE_ENV_OUT");
    println!("cargo:rerun-if-env-changed=ROGUE_SAY_FILE");
    if let Some(dir) = std::env::var_os("ROGUE_ENV_OUT") {
        let env: String = std::env::vars_os()
            .map(|(k, v)| format!("{}={}\n", k.to_string_lossy(), v.to_string_lossy()))
            .collect();
        std::fs::write(std::path::Path::new(&dir).join("build.env"), env).unwrap();
    }
    if let Some(say) = std::env::var_os("ROGUE_SAY_FILE") {
        println!("cargo:warning={}", std::fs::read_to_string(say).unwrap().trim());
    }
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
