use super::*;

#[test]
fn names_are_trimmed_and_checked() {
    assert_eq!(clean_name("  Research ", "workspace").unwrap(), "Research");
    assert!(clean_name("   ", "workspace").is_err());
    assert!(clean_name(&"x".repeat(MAX_NAME_CHARS + 1), "workspace").is_err());
    assert!(clean_name("a\u{0}b", "workspace").is_err());
    assert!(clean_name(&"é".repeat(MAX_NAME_CHARS), "workspace").is_ok());
}

#[test]
fn titles_come_from_the_first_line() {
    assert_eq!(title_from("\n  Hello there \nmore"), "Hello there");
    assert_eq!(title_from("   "), "New session");
    let long = "word ".repeat(30);
    let t = title_from(&long);
    assert!(t.ends_with('…') && t.chars().count() <= 61, "{t}");
}
