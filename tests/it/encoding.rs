//! Hostile bytes in budgets.yaml: a NUL or another control character YAML
//! forbids is an error at its position (it used to end the spec silently,
//! dropping the budgets after it); a UTF-8 BOM is accepted; UTF-16/UTF-32
//! and other non-UTF-8 bytes are refused by name; an endless spec fails fast.

use crate::common;

use std::path::Path;

const SPEC: &str = "version: 1
device:
  name: card
  capacity: 4 GiB
  reserve: 300 MiB
components:
  m:
    workload: mlp
    budgets:
      params: < 1 MiB
";

fn err(bytes: &[u8]) -> String {
    gate_spec::budget::parse_bytes(Path::new("budgets.yaml"), bytes)
        .unwrap_err()
        .to_string()
}

fn validate(bytes: &[u8]) -> (i32, String) {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("budgets.yaml");
    std::fs::write(&p, bytes).unwrap();
    let out = common::gate().args(["validate", "--budgets"]).arg(&p).output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_nul_byte_is_an_error_at_its_position_not_the_end_of_the_spec() {
    let text = SPEC.replace("  m:\n", "  m:\n    \0\n");
    assert_eq!(
        err(text.as_bytes()),
        "budgets.yaml:8:5: error: a NUL byte, which YAML does not allow in a document\n  hint: remove it; write special characters inside a quoted string as escapes (`\\u0000`)"
    );
    let (code, stderr) = validate(text.as_bytes());
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("budgets.yaml:8:5: error: a NUL byte"), "{stderr}");
}

#[test]
fn other_forbidden_control_characters_are_errors_too() {
    for (c, name) in [
        ('\u{1}', "U+0001"),
        ('\u{1B}', "U+001B"),
        ('\u{7F}', "U+007F"),
        ('\u{9B}', "U+009B"),
    ] {
        let text = SPEC.replace("name: card", &format!("name: ca{c}rd"));
        let e = err(text.as_bytes());
        assert!(
            e.starts_with(&format!(
                "budgets.yaml:3:11: error: the control character {name}, which YAML does not allow"
            )),
            "{e}"
        );
    }
    // Tab, CR LF and NEL are allowed.
    let ok = SPEC
        .replace('\n', "\r\n")
        .replace("name: card", "name: \"ca\trd\u{85}\"");
    gate_spec::budget::parse_bytes(Path::new("budgets.yaml"), ok.as_bytes()).unwrap();
}

#[test]
fn a_utf8_byte_order_mark_is_accepted() {
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend_from_slice(SPEC.as_bytes());
    let spec = gate_spec::budget::parse_bytes(Path::new("budgets.yaml"), &bytes).unwrap();
    assert_eq!(spec.components.len(), 1);
    assert_eq!(validate(&bytes).0, 0);
}

#[test]
fn utf16_and_utf32_are_refused_by_name() {
    let utf16 = |be: bool| -> Vec<u8> {
        let mut b = if be { vec![0xFE, 0xFF] } else { vec![0xFF, 0xFE] };
        for u in SPEC.encode_utf16() {
            b.extend(if be { u.to_be_bytes() } else { u.to_le_bytes() });
        }
        b
    };
    let utf32 = |be: bool| -> Vec<u8> {
        let mut b = if be {
            vec![0, 0, 0xFE, 0xFF]
        } else {
            vec![0xFF, 0xFE, 0, 0]
        };
        for c in SPEC.chars() {
            b.extend(if be {
                (c as u32).to_be_bytes()
            } else {
                (c as u32).to_le_bytes()
            });
        }
        b
    };
    for (bytes, name) in [
        (utf16(false), "UTF-16 LE"),
        (utf16(true), "UTF-16 BE"),
        (utf32(false), "UTF-32 LE"),
        (utf32(true), "UTF-32 BE"),
    ] {
        assert_eq!(
            err(&bytes),
            format!("budgets.yaml:1:1: error: the spec is {name}; gate reads UTF-8\n  hint: save it as UTF-8")
        );
        let (code, stderr) = validate(&bytes);
        assert_eq!(code, 2, "{stderr}");
        assert!(
            stderr.contains(&format!("the spec is {name}; gate reads UTF-8")),
            "{stderr}"
        );
    }
}

#[test]
fn invalid_utf8_is_refused_at_the_bad_byte() {
    let text = SPEC.replace("name: card", "name: cärd\u{0}").into_bytes();
    // A Latin-1 `ä` after a UTF-8 `ä`: the bad byte (after `cärd`) is on line 3, column 13: columns count characters.
    let mut bytes = text.clone();
    let at = bytes.iter().position(|&b| b == 0).unwrap();
    bytes[at] = 0xE4;
    assert_eq!(
        err(&bytes),
        "budgets.yaml:3:13: error: the spec is not valid UTF-8 (byte 0xE4)\n  hint: save it as UTF-8"
    );
    assert_eq!(validate(&bytes).0, 2);
}

#[cfg(unix)]
#[test]
fn an_endless_spec_fails_fast_with_the_cap() {
    let out = common::gate()
        .args(["validate", "--budgets", "/dev/zero"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("/dev/zero: the spec is larger than 67108864 bytes, the most gate reads"),
        "{stderr}"
    );
    assert!(stderr.contains("hint: "), "{stderr}");
}
