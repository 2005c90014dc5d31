//! The README's budgets.yaml reference is a valid spec (it is the example a
//! new user copies first).

#[test]
fn the_readme_spec_example_validates() {
    let readme = include_str!("../README.md");
    let section = readme
        .find("## budgets.yaml")
        .expect("the README has a budgets.yaml section");
    let start = readme[section..].find("```yaml\n").expect("a yaml block") + section + "```yaml\n".len();
    let end = readme[start..].find("```").expect("the block ends") + start;
    let spec = gate::__private::budget::parse(std::path::Path::new("README.md"), &readme[start..end])
        .unwrap_or_else(|d| panic!("the README's example spec is invalid:\n{d}"));
    assert!(spec.component("tft").is_some());
}
