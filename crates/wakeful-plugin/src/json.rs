//! Strict JSON with positions.
//!
//! Claude Code reads plugin files with `JSON.parse`: no comments, no trailing commas,
//! double-quoted keys and strings only. `serde_json` has the same strictness and
//! reports the line and column of a syntax error, so it decides validity; the AST with
//! byte ranges for every value comes from `jsonc-parser` (run with every extension
//! turned off) once the text is known to be valid.

use std::ops::Range;
use std::path::PathBuf;

use jsonc_parser::ast::{Object, ObjectProp, ObjectPropName, Value};
use jsonc_parser::common::Ranged;

use crate::{Diagnostic, Severity};

/// The text of one file, with what is needed to turn byte offsets into positions.
pub(crate) struct Source {
    /// The path shown in diagnostics.
    pub display: PathBuf,
    pub text: String,
    line_starts: Vec<usize>,
}

impl Source {
    pub fn new(display: PathBuf, text: String) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Source {
            display,
            text,
            line_starts,
        }
    }

    /// The 0-based line index holding `offset`.
    fn line_index(&self, offset: usize) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        }
    }

    /// The 1-based line holding `offset`.
    pub fn line_of(&self, offset: usize) -> usize {
        self.line_index(offset) + 1
    }

    /// The text of the 0-based line `index`, without its line ending.
    fn line_text(&self, index: usize) -> &str {
        let start = self.line_starts.get(index).copied().unwrap_or(0);
        let end = self
            .line_starts
            .get(index + 1)
            .map_or(self.text.len(), |next| next - 1);
        self.text
            .get(start..end)
            .unwrap_or("")
            .trim_end_matches('\r')
    }

    /// A diagnostic pointing at `range` of this file.
    pub fn diag(
        &self,
        severity: Severity,
        code: &str,
        range: Range<usize>,
        message: impl Into<String>,
        help: impl Into<String>,
    ) -> Diagnostic {
        let start = floor_char_boundary(&self.text, range.start.min(self.text.len()));
        let index = self.line_index(start);
        let line_start = self.line_starts.get(index).copied().unwrap_or(0);
        let line = self.line_text(index);
        let column = self
            .text
            .get(line_start..start)
            .map_or(0, |p| p.chars().count())
            + 1;
        let line_end = line_start + line.len();
        let end = floor_char_boundary(&self.text, range.end.clamp(start, line_end.max(start)));
        let snippet = self
            .text
            .get(start..end)
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        Diagnostic {
            severity,
            code: code.to_string(),
            message: message.into(),
            file: self.display.clone(),
            line: index + 1,
            column,
            snippet,
            help: help.into(),
            source_line: Some(line.to_string()),
        }
    }

    /// Parses the file as strict JSON; a syntax error becomes an `invalid-json`
    /// diagnostic.
    pub fn parse(&self) -> Result<Value<'_>, Box<Diagnostic>> {
        if let Err(e) = serde_json::from_str::<serde_json::Value>(&self.text) {
            return Err(Box::new(self.syntax_error(&e)));
        }
        let options = jsonc_parser::ParseOptions {
            allow_comments: false,
            allow_loose_object_property_names: false,
            allow_trailing_commas: false,
        };
        match jsonc_parser::parse_to_ast(&self.text, &Default::default(), &options) {
            Ok(result) => result.value.ok_or_else(|| {
                Box::new(self.diag(
                    Severity::Error,
                    crate::codes::INVALID_JSON,
                    0..0,
                    "the file holds no JSON value",
                    STRICT_JSON_HELP,
                ))
            }),
            Err(e) => {
                let r = e.range();
                Err(Box::new(self.diag(
                    Severity::Error,
                    crate::codes::INVALID_JSON,
                    r.start..r.end,
                    format!("invalid JSON: {}", e.kind()),
                    STRICT_JSON_HELP,
                )))
            }
        }
    }

    fn syntax_error(&self, e: &serde_json::Error) -> Diagnostic {
        let full = e.to_string();
        let what = match full.rfind(" at line ") {
            Some(i) => &full[..i],
            None => full.as_str(),
        };
        let offset = if e.is_eof() {
            // Point just after the last character rather than at an empty last line.
            self.text.trim_end().len()
        } else {
            let line_start = self
                .line_starts
                .get(e.line().saturating_sub(1))
                .copied()
                .unwrap_or(0);
            (line_start + e.column().max(1) - 1).min(self.text.len())
        };
        let offset = floor_char_boundary(&self.text, offset);
        let next = self.text[offset..]
            .chars()
            .next()
            .map_or(offset, |c| offset + c.len_utf8());
        let mut help = STRICT_JSON_HELP.to_string();
        let mut what = what.to_string();
        let at = &self.text[offset..];
        let mut next = next;
        if at.starts_with("//") || at.starts_with("/*") {
            next = offset + 2;
            what = "a comment (JSON has none)".to_string();
            help = "remove the comment: Claude Code reads the file with JSON.parse, which \
                    accepts no comments (a monitor's `description` can carry the note)"
                .to_string();
        } else if self.text.starts_with('\u{feff}') {
            help = "the file starts with a byte-order mark (BOM): save it as UTF-8 without BOM"
                .to_string();
        } else if what.contains("trailing comma") {
            help = "remove the trailing comma: JSON (as Claude Code's JSON.parse reads it) allows none"
                .to_string();
        }
        self.diag(
            Severity::Error,
            crate::codes::INVALID_JSON,
            offset..next,
            format!("invalid JSON: {what}"),
            help,
        )
    }
}

const STRICT_JSON_HELP: &str =
    "the file must be strict JSON, as Claude Code's JSON.parse reads it: \
     double-quoted keys and strings, no comments, no trailing commas";

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The byte range of a value.
pub(crate) fn range(v: &Value<'_>) -> Range<usize> {
    let r = v.range();
    r.start..r.end
}

/// The byte range of a property's name (quotes included).
pub(crate) fn name_range(p: &ObjectProp<'_>) -> Range<usize> {
    match &p.name {
        ObjectPropName::String(s) => s.range.start..s.range.end,
        ObjectPropName::Word(w) => w.range.start..w.range.end,
    }
}

/// The range of an object's opening brace.
pub(crate) fn open_brace(o: &Object<'_>) -> Range<usize> {
    o.range.start..o.range.start + 1
}

/// The last property named `key` (JSON.parse keeps the last of duplicate keys).
pub(crate) fn get<'a, 'b>(o: &'b Object<'a>, key: &str) -> Option<&'b ObjectProp<'a>> {
    o.properties.iter().rev().find(|p| p.name.as_str() == key)
}

/// The JSON type name of a value, for messages.
pub(crate) fn type_name(v: &Value<'_>) -> &'static str {
    match v {
        Value::StringLit(_) => "a string",
        Value::NumberLit(_) => "a number",
        Value::BooleanLit(_) => "a boolean",
        Value::Object(_) => "an object",
        Value::Array(_) => "an array",
        Value::NullKeyword(_) => "null",
    }
}

/// For a JSON string literal as written (quotes included), the offset in the literal of
/// each byte of the decoded string, plus one final entry for its end (the closing
/// quote). Returns `None` if the literal is not a well-formed JSON string.
pub(crate) fn decoded_offsets(literal: &str) -> Option<Vec<usize>> {
    let body = literal.strip_prefix('"')?.strip_suffix('"')?;
    let mut map = Vec::with_capacity(body.len() + 1);
    let mut iter = body.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        let raw = i + 1;
        if c != '\\' {
            map.resize(map.len() + c.len_utf8(), raw);
            continue;
        }
        let (_, e) = iter.next()?;
        let decoded_len = match e {
            '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' => 1,
            'u' => {
                let hex: String = (0..4).filter_map(|_| iter.next().map(|(_, h)| h)).collect();
                let unit = u32::from_str_radix(&hex, 16).ok()?;
                if (0xD800..0xDC00).contains(&unit) {
                    // A surrogate pair: `\uD83D\uDE00` is one 4-byte character.
                    for _ in 0..6 {
                        iter.next()?;
                    }
                    4
                } else {
                    char::from_u32(unit).map_or(3, char::len_utf8)
                }
            }
            _ => return None,
        };
        map.resize(map.len() + decoded_len, raw);
    }
    map.push(literal.len() - 1);
    Some(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(text: &str) -> Source {
        Source::new(PathBuf::from("m.json"), text.to_string())
    }

    #[test]
    fn positions_are_one_based_and_count_characters() {
        let s = src("[\n  {\"é\": \"x\", \"nmae\": 1}\n]\n");
        let at = s.text.find("\"nmae\"").unwrap();
        let d = s.diag(Severity::Error, "k", at..at + 6, "m", "h");
        assert_eq!((d.line, d.column), (2, 14));
        assert_eq!(d.snippet.as_deref(), Some("\"nmae\""));
        assert_eq!(
            d.source_line.as_deref(),
            Some("  {\"é\": \"x\", \"nmae\": 1}")
        );
    }

    #[test]
    fn snippets_stop_at_the_end_of_the_line() {
        let s = src("[\n  {\n  }\n]");
        let d = s.diag(Severity::Error, "k", 4..9, "m", "h");
        assert_eq!((d.line, d.column), (2, 3));
        assert_eq!(d.snippet.as_deref(), Some("{"));
    }

    #[test]
    fn syntax_errors_have_positions() {
        let d = src("[\n  {\"a\": 1,}\n]").parse().unwrap_err();
        assert_eq!(d.code, "invalid-json");
        assert_eq!((d.line, d.column), (2, 11));
        assert!(d.message.contains("trailing comma"), "{}", d.message);
        assert!(!d.message.contains("at line"), "{}", d.message);

        let d = src("[\n  // comment\n]").parse().unwrap_err();
        assert_eq!((d.line, d.column), (2, 3));
        assert!(d.help.contains("comments"), "{}", d.help);

        let d = src("[\n  {\"a\": 1}\n").parse().unwrap_err();
        assert!(d.message.contains("EOF"), "{}", d.message);
        assert_eq!((d.line, d.column), (2, 11));

        let d = src("").parse().unwrap_err();
        assert_eq!((d.line, d.column), (1, 1));

        let d = src("{'a': 1}").parse().unwrap_err();
        assert_eq!((d.line, d.column), (1, 2));

        let d = src("[\"é\", tru]").parse().unwrap_err();
        assert_eq!(d.line, 1);
        assert_eq!(d.snippet.as_deref(), Some("]"));
    }

    #[test]
    fn valid_json_gives_an_ast() {
        let s = src("[{\"name\": \"a\", \"name\": \"b\"}]");
        let v = s.parse().unwrap();
        let o = v.as_array().unwrap().elements[0].as_object().unwrap();
        let p = get(o, "name").unwrap();
        assert_eq!(p.value.as_string_lit().unwrap().value, "b");
        assert_eq!(&s.text[name_range(p)], "\"name\"");
    }

    #[test]
    fn decoded_offsets_map_escapes() {
        let lit = r#""a\"b\u00e9c\ud83d\ude00d""#;
        let decoded: String = serde_json::from_str(lit).unwrap();
        let map = decoded_offsets(lit).unwrap();
        assert_eq!(map.len(), decoded.len() + 1);
        assert_eq!(map[0], 1); // a
        assert_eq!(map[1], 2); // \"
        assert_eq!(map[2], 4); // b
        assert_eq!(map[3], 5); // é (2 bytes)
        assert_eq!(map[4], 5);
        assert_eq!(map[5], 11); // c
        assert_eq!(map[6], 12); // emoji (4 bytes)
        assert_eq!(map[10], 24); // d
        assert_eq!(map[11], lit.len() - 1);
        assert!(decoded_offsets("\"\\x\"").is_none());
        assert!(decoded_offsets("nope").is_none());
    }
}
