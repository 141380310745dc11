//! The filters identity providers send (RFC 7644 §3.4.2.2), as far as this server answers them:
//! one `eq` comparison on `userName`, `emails` (or `emails.value`, `emails[type eq "work"].value`),
//! `externalId`, `displayName` or `id`. Anything else is a clear `invalidFilter`.

use uuid::Uuid;

use super::{ScimError, ScimResult};
use crate::model::teams::DirectoryFilter;

/// Longest filter read.
const MAX_FILTER: usize = 1024;

/// Parses a filter for `resource` (`User` or `Group`); none is every resource.
pub fn parse(raw: Option<&str>, resource: &str) -> ScimResult<DirectoryFilter> {
    let Some(raw) = raw.map(str::trim).filter(|s| !s.is_empty()) else { return Ok(DirectoryFilter::All) };
    let invalid = |why: &str| {
        ScimError::bad("invalidFilter", format!("The filter {raw:?} is not one this server answers: {why}"))
    };
    if raw.len() > MAX_FILTER {
        return Err(ScimError::bad("invalidFilter", format!("A filter is at most {MAX_FILTER} characters.")));
    }
    // attribute SP "eq" SP value, where the attribute may carry a value filter in brackets.
    let (attribute, rest) = split_attribute(raw).ok_or_else(|| invalid("expected an attribute"))?;
    let rest = rest.trim_start();
    let (op, value) =
        rest.split_once(char::is_whitespace).ok_or_else(|| invalid("expected `eq` and a value"))?;
    if !op.eq_ignore_ascii_case("eq") {
        return Err(invalid("only `eq` is supported"));
    }
    let value = parse_string(value.trim()).ok_or_else(|| invalid("the value must be a quoted string"))?;
    let attribute = attribute.to_ascii_lowercase();
    let bare = attribute.split('[').next().unwrap_or_default().to_string();
    let is_email_value = bare == "emails"
        && (attribute == "emails" || attribute.ends_with("].value") || attribute == "emails.value");
    match (resource, bare.as_str()) {
        ("User", "username") => Ok(DirectoryFilter::Email(value)),
        ("User", "emails") if is_email_value => Ok(DirectoryFilter::Email(value)),
        ("User" | "Group", "externalid") => Ok(DirectoryFilter::ExternalId(value)),
        ("User" | "Group", "displayname") => Ok(DirectoryFilter::DisplayName(value)),
        ("User" | "Group", "id") => {
            Ok(Uuid::parse_str(&value).map(DirectoryFilter::Id).unwrap_or(DirectoryFilter::Id(Uuid::nil())))
        }
        _ => Err(invalid("unknown attribute")),
    }
}

/// The attribute path at the start of a filter (letters, digits, `.`, `$`, `_`, `-`, and one
/// bracketed value filter), and what follows.
fn split_attribute(s: &str) -> Option<(&str, &str)> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.checked_sub(1)?,
            c if c.is_whitespace() && depth == 0 => return (i > 0).then(|| (&s[..i], &s[i..])),
            c if depth == 0 && !(c.is_ascii_alphanumeric() || matches!(c, '.' | '$' | '_' | '-' | ':')) => {
                return None;
            }
            _ => {}
        }
    }
    None
}

/// A JSON string literal, as filters quote values.
fn parse_string(s: &str) -> Option<String> {
    if !(s.starts_with('"') && s.ends_with('"') && s.len() >= 2) {
        return None;
    }
    serde_json::from_str::<String>(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_providers_send_are_read() {
        assert_eq!(
            parse(Some(r#"userName eq "Ada@Example.com""#), "User").ok(),
            Some(DirectoryFilter::Email("Ada@Example.com".into()))
        );
        assert_eq!(
            parse(Some(r#"externalId eq "e-1""#), "User").ok(),
            Some(DirectoryFilter::ExternalId("e-1".into()))
        );
        assert_eq!(
            parse(Some(r#"emails[type eq "work"].value eq "a@b.c""#), "User").ok(),
            Some(DirectoryFilter::Email("a@b.c".into()))
        );
        assert_eq!(
            parse(Some(r#"displayName eq "eng \"core\"""#), "Group").ok(),
            Some(DirectoryFilter::DisplayName("eng \"core\"".into()))
        );
        assert_eq!(parse(None, "User").ok(), Some(DirectoryFilter::All));
    }

    #[test]
    fn malformed_and_unsupported_filters_are_invalid_filter() {
        for bad in [
            "userName eq",
            "userName",
            "userName co \"a\"",
            "userName eq a",
            "bogus eq \"a\"",
            "emails[type eq \"work\" eq \"x\"",
            "(userName eq \"a\")",
            "userName eq \"a\" and displayName eq \"b\"",
        ] {
            let e = parse(Some(bad), "User").unwrap_err();
            assert_eq!((e.status, e.scim_type), (400, Some("invalidFilter")), "{bad}");
        }
        assert!(parse(Some(r#"userName eq "a""#), "Group").is_err());
        assert!(parse(Some(&"a".repeat(2000)), "User").is_err());
    }
}
