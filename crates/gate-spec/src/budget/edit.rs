//! Writing settings into a component of budgets.yaml as a person would:
//! the value of a key that is there replaced in place (its comment kept),
//! a key that is not added under the component, every other line and
//! comment untouched. `gate plan --apply` writes its chosen configuration
//! so. The result is validated before it is written.

use std::path::Path;

use crate::hint::Problem;

/// One change to a component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// `checkpoint: { chunk: N }`, or `checkpoint: none`.
    Checkpoint(Option<usize>),
    /// A key of the component's `config:` and its value (JSON, which YAML reads the same).
    Config(String, String),
    /// A key of the component itself (`batch_size`, `dtype`, `master_weights`).
    Key(String, String),
}

/// Applies `edits` to component `name` of the spec at `path`, and writes it
/// back once the edited spec validates.
pub fn apply_settings(path: &Path, name: &str, edits: &[Edit]) -> Result<(), Problem> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Problem::new(format!("cannot read {}: {e}", path.display())))?;
    let edited = apply_to_text(&text, name, edits).map_err(|m| {
        Problem::new(format!("{}: cannot write the plan into `{name}`: {m}", path.display()))
            .with_hint("write the lines the plan printed into the component by hand")
    })?;
    super::parse_bytes(path, edited.as_bytes()).map_err(|e| {
        Problem::new(format!(
            "{}: the spec with the plan's lines does not validate, so it was left as it was: {e}",
            path.display()
        ))
        .with_hint("write the lines the plan printed into the component by hand")
    })?;
    std::fs::write(path, edited).map_err(|e| Problem::new(format!("cannot write {}: {e}", path.display())))
}

/// The spec text with `edits` applied to component `name` (a key of
/// `components:`; a variant is not edited).
pub fn apply_to_text(text: &str, name: &str, edits: &[Edit]) -> Result<String, String> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for edit in edits {
        let block = component_block(&lines, name)?;
        match edit {
            Edit::Checkpoint(chunk) => {
                let value = chunk.map_or("none".to_string(), |n| format!("{{ chunk: {n} }}"));
                set_key(&mut lines, &block, "checkpoint", &value);
            }
            Edit::Key(key, value) => set_key(&mut lines, &block, key, value),
            Edit::Config(key, value) => set_config(&mut lines, &block, key, value)?,
        }
    }
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

/// A component's lines: its own (`at`), the first of its body, the end
/// (exclusive), and its keys' indentation.
#[derive(Debug, Clone)]
struct Block {
    at: usize,
    end: usize,
    indent: usize,
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

fn is_content(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && !t.starts_with('#')
}

fn component_block(lines: &[String], name: &str) -> Result<Block, String> {
    let top = lines
        .iter()
        .position(|l| l.trim_end() == "components:" || l.starts_with("components:"))
        .ok_or("the spec has no `components:` block")?;
    let want = format!("{name}:");
    let mut comp_indent = None;
    for (i, line) in lines.iter().enumerate().skip(top + 1) {
        if !is_content(line) {
            continue;
        }
        let ind = indent_of(line);
        if ind == 0 {
            break;
        }
        let ci = *comp_indent.get_or_insert(ind);
        if ind == ci && line.trim_start().starts_with(&want) {
            if line.trim_start()[want.len()..].trim_start().starts_with('{') {
                return Err("the component is written on one line ({ ... })".into());
            }
            let end = (i + 1..lines.len())
                .find(|&j| is_content(&lines[j]) && indent_of(&lines[j]) <= ci)
                .unwrap_or(lines.len());
            let indent = (i + 1..end)
                .find(|&j| is_content(&lines[j]))
                .map(|j| indent_of(&lines[j]))
                .ok_or("the component has no keys")?;
            return Ok(Block { at: i, end, indent });
        }
    }
    Err(format!("no component `{name}` under `components:`"))
}

/// The line of key `key` directly in the block, if any.
fn key_line(lines: &[String], block: &Block, key: &str) -> Option<usize> {
    let want = format!("{key}:");
    (block.at + 1..block.end)
        .find(|&j| indent_of(&lines[j]) == block.indent && lines[j].trim_start().starts_with(&want))
}

/// The trailing comment of a line (with the spaces before it), if any.
fn comment_of(line: &str) -> &str {
    match line.find(" #") {
        Some(i) => &line[i..],
        None => "",
    }
}

fn set_key(lines: &mut Vec<String>, block: &Block, key: &str, value: &str) {
    let pad = " ".repeat(block.indent);
    match key_line(lines, block, key) {
        Some(j) => {
            let comment = comment_of(&lines[j]).to_string();
            // A block value (a map under the key) goes with it.
            let end = (j + 1..block.end)
                .find(|&k| is_content(&lines[k]) && indent_of(&lines[k]) <= block.indent)
                .unwrap_or(block.end);
            lines[j] = format!("{pad}{key}: {value}{comment}");
            lines.drain(j + 1..end);
        }
        None => {
            let after = key_line(lines, block, "workload").unwrap_or(block.at);
            lines.insert(after + 1, format!("{pad}{key}: {value}"));
        }
    }
}

fn set_config(lines: &mut Vec<String>, block: &Block, key: &str, value: &str) -> Result<(), String> {
    let Some(j) = key_line(lines, block, "config") else {
        set_key(lines, block, "config", &format!("{{ {key}: {value} }}"));
        return Ok(());
    };
    let line = lines[j].clone();
    let after = line.trim_start()["config:".len()..].trim_start();
    if after.starts_with('{') {
        // A flow map on its one line.
        let close = line
            .rfind('}')
            .ok_or("`config:` opens a `{` it does not close on its line")?;
        let open = line.find('{').unwrap_or(0);
        let inner = &line[open + 1..close];
        let mut entries: Vec<String> = inner
            .split(',')
            .map(|e| e.trim().to_string())
            .filter(|e| !e.is_empty())
            .collect();
        if inner.contains('{') || inner.contains('[') {
            return Err("its `config:` map nests maps or lists on one line".into());
        }
        match entries
            .iter_mut()
            .find(|e| e.split(':').next().map(str::trim) == Some(key))
        {
            Some(e) => *e = format!("{key}: {value}"),
            None => entries.push(format!("{key}: {value}")),
        }
        lines[j] = format!("{}{{ {} }}{}", &line[..open], entries.join(", "), &line[close + 1..]);
        return Ok(());
    }
    if !after.is_empty() && !after.starts_with('#') {
        return Err("its `config:` is neither a map on one line nor a block".into());
    }
    // A block map under `config:`.
    let end = (j + 1..block.end)
        .find(|&k| is_content(&lines[k]) && indent_of(&lines[k]) <= block.indent)
        .unwrap_or(block.end);
    let inner = Block {
        at: j,
        end,
        indent: (j + 1..end)
            .find(|&k| is_content(&lines[k]))
            .map_or(block.indent + 2, |k| indent_of(&lines[k])),
    };
    set_key(lines, &inner, key, value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = "version: 1\ncomponents:\n  tft:\n    workload: tft # the TFT\n    batch_size: 32\n    checkpoint: none\n    config:\n      hidden_dim: 64\n      adamw_slice: 0 # whole\n    budgets:\n      training_peak: < 180 MiB\n  dqn:\n    workload: dqn\n    config: { target_sync: 100 }\n";

    #[test]
    fn a_key_there_is_replaced_in_place_and_its_comment_kept() {
        let out = apply_to_text(
            SPEC,
            "tft",
            &[
                Edit::Checkpoint(Some(64)),
                Edit::Config("adamw_slice".into(), "262144".into()),
            ],
        )
        .unwrap();
        assert!(out.contains("    checkpoint: { chunk: 64 }\n"), "{out}");
        assert!(out.contains("      adamw_slice: 262144 # whole\n"), "{out}");
        assert!(out.contains("      hidden_dim: 64\n"), "{out}");
        assert_eq!(out.lines().count(), SPEC.lines().count());
    }

    #[test]
    fn a_key_not_there_is_added_under_the_workload() {
        let out = apply_to_text(
            SPEC,
            "dqn",
            &[
                Edit::Key("batch_size".into(), "16".into()),
                Edit::Config("lr".into(), "0.1".into()),
            ],
        )
        .unwrap();
        assert!(out.contains("    workload: dqn\n    batch_size: 16\n"), "{out}");
        assert!(out.contains("    config: { target_sync: 100, lr: 0.1 }"), "{out}");
        // The other component is untouched.
        assert!(out.starts_with(&SPEC[..SPEC.find("  dqn:").unwrap()]));
    }

    #[test]
    fn an_unknown_component_is_said() {
        let e = apply_to_text(SPEC, "ppo", &[Edit::Checkpoint(None)]).unwrap_err();
        assert!(e.contains("no component `ppo`"), "{e}");
    }
}
