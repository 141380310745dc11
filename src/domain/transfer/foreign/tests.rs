use std::collections::HashMap;

use serde_json::{Value, json};

use super::*;

fn chatgpt_fixture() -> Value {
    serde_json::from_str(include_str!("../../../../tests/fixtures/import/chatgpt_conversations.json"))
        .unwrap()
}

fn open_webui_fixture() -> Value {
    serde_json::from_str(include_str!("../../../../tests/fixtures/import/open_webui_export.json")).unwrap()
}

fn by_id(session: &ArchivedSession) -> HashMap<&str, &ArchivedMessage> {
    session.messages.iter().map(|m| (m.id.as_str(), m)).collect()
}

/// The text part's text ("" when there is none).
fn text_of(message: &ArchivedMessage) -> &str {
    message
        .parts
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "text")
        .map_or("", |p| p["text"].as_str().unwrap())
}

fn parent_of<'a>(session: &'a ArchivedSession, id: &str) -> Option<&'a str> {
    by_id(session)[id].parent.as_deref()
}

fn chosen_of<'a>(session: &'a ArchivedSession, id: &str) -> Option<&'a str> {
    by_id(session)[id].chosen_child.as_deref()
}

/// Every message's parent comes earlier in the list, and every parent is in it.
fn assert_parents_first(session: &ArchivedSession) {
    let mut seen = std::collections::HashSet::new();
    for message in &session.messages {
        if let Some(parent) = &message.parent {
            assert!(seen.contains(parent.as_str()), "{} comes before its parent {parent}", message.id);
        }
        seen.insert(message.id.as_str());
    }
}

/// The ids along the chosen children from the active root.
fn active_path(session: &ArchivedSession) -> Vec<&str> {
    let index = by_id(session);
    let mut path = Vec::new();
    let mut at = session.active_root.as_deref();
    while let Some(id) = at {
        path.push(id);
        at = index[id].chosen_child.as_deref();
    }
    path
}

/// A ChatGPT mapping entry with a plain text message (`role` "" for a null message).
fn gpt_node(id: &str, parent: Option<&str>, children: &[&str], role: &str, text: &str) -> Value {
    let message = if role.is_empty() {
        Value::Null
    } else {
        json!({
            "id": id,
            "author": {"role": role, "name": null, "metadata": {}},
            "create_time": 1700000000.0,
            "content": {"content_type": "text", "parts": [text]},
            "metadata": {},
            "recipient": "all"
        })
    };
    json!({"id": id, "message": message, "parent": parent, "children": children})
}

fn gpt_conv(title: &str, nodes: Vec<Value>, current: Option<&str>) -> Value {
    let mapping: Map<String, Value> =
        nodes.into_iter().map(|n| (n["id"].as_str().unwrap().to_string(), n)).collect();
    json!([{"title": title, "create_time": 1700000000.0, "mapping": mapping, "current_node": current}])
}

fn owu_msg(id: &str, parent: Option<&str>, children: &[&str], role: &str, content: &str) -> Value {
    json!({"id": id, "parentId": parent, "childrenIds": children, "role": role, "content": content,
           "timestamp": 1719000000})
}

fn owu_chat(title: &str, messages: Vec<Value>, current: Option<&str>) -> Value {
    let map: Map<String, Value> =
        messages.into_iter().map(|m| (m["id"].as_str().unwrap().to_string(), m)).collect();
    json!([{"id": "c1", "title": title, "chat": {"title": title, "history": {"messages": map, "currentId": current}},
            "created_at": 1719000000}])
}

/// A single chain `n0 → n1 → …` of `len` user/assistant messages.
fn gpt_chain(len: usize) -> Value {
    let ids: Vec<String> = (0..len).map(|i| format!("n{i}")).collect();
    let nodes = (0..len)
        .map(|i| {
            let parent = i.checked_sub(1).map(|p| ids[p].as_str());
            let children: Vec<&str> = ids.get(i + 1).map(String::as_str).into_iter().collect();
            gpt_node(&ids[i], parent, &children, if i % 2 == 0 { "user" } else { "assistant" }, "hi")
        })
        .collect();
    gpt_conv("Long", nodes, ids.last().map(String::as_str))
}

fn owu_chain(len: usize) -> Value {
    let ids: Vec<String> = (0..len).map(|i| format!("n{i}")).collect();
    let messages = (0..len)
        .map(|i| {
            let parent = i.checked_sub(1).map(|p| ids[p].as_str());
            let children: Vec<&str> = ids.get(i + 1).map(String::as_str).into_iter().collect();
            owu_msg(&ids[i], parent, &children, if i % 2 == 0 { "user" } else { "assistant" }, "hi")
        })
        .collect();
    owu_chat("Long", messages, ids.last().map(String::as_str))
}

// ---------------------------------------------------------------------------------------------
// ChatGPT fixture

#[test]
fn chatgpt_keeps_every_branch() {
    let sessions = from_chatgpt(&chatgpt_fixture()).unwrap();
    assert_eq!(sessions.len(), 2);
    let trip = &sessions[0];
    assert_eq!(trip.title, "Trip plan to Lisbon");
    // 15 entries: the empty root and the hidden system prompt are left out.
    assert_eq!(trip.messages.len(), 13);
    let parents = [
        ("u-0001", None),
        ("a-0001", Some("u-0001")),
        ("u-0002a", Some("a-0001")),
        ("a-0002a", Some("u-0002a")),
        ("u-0002b", Some("a-0001")),
        ("a-0002b1", Some("u-0002b")),
        ("a-0002b2", Some("u-0002b")),
        ("u-0003", Some("a-0002b2")),
        ("a-0003", Some("u-0003")),
        ("u-0004", Some("a-0003")),
        ("a-0004", Some("u-0004")),
        ("t-0004", Some("a-0004")),
        ("a-0005", Some("t-0004")),
    ];
    for (id, parent) in parents {
        assert_eq!(parent_of(trip, id), parent, "parent of {id}");
    }
    assert_parents_first(trip);
    for message in &trip.messages {
        assert_eq!(message.kind, "text");
        assert_eq!(message.status, "complete");
    }
    let sky = &sessions[1];
    let ids: Vec<&str> = sky.messages.iter().map(|m| m.id.as_str()).collect();
    // The custom instructions (hidden) are left out; the question hangs from nothing.
    assert_eq!(ids, ["q-0001", "th-0001", "rr-0001", "ans-0001"]);
    assert_eq!(parent_of(sky, "q-0001"), None);
    assert!(sky.archived);
    assert!(!trip.archived);
}

#[test]
fn chatgpt_chosen_children_follow_the_current_node() {
    let sessions = from_chatgpt(&chatgpt_fixture()).unwrap();
    let trip = &sessions[0];
    assert_eq!(trip.active_root.as_deref(), Some("u-0001"));
    // The edited prompt and the regenerated reply that lead to `current_node` are chosen.
    assert_eq!(chosen_of(trip, "a-0001"), Some("u-0002b"));
    assert_eq!(chosen_of(trip, "u-0002b"), Some("a-0002b2"));
    // Off the path, the only (last) child.
    assert_eq!(chosen_of(trip, "u-0002a"), Some("a-0002a"));
    assert_eq!(chosen_of(trip, "a-0002a"), None);
    assert_eq!(chosen_of(trip, "a-0002b1"), None);
    assert_eq!(
        active_path(trip),
        [
            "u-0001", "a-0001", "u-0002b", "a-0002b2", "u-0003", "a-0003", "u-0004", "a-0004", "t-0004",
            "a-0005"
        ]
    );
}

#[test]
fn chatgpt_contents_become_parts() {
    let sessions = from_chatgpt(&chatgpt_fixture()).unwrap();
    let trip = by_id(&sessions[0]);
    assert_eq!(text_of(trip["u-0001"]), "Plan a 3-day trip to Lisbon for two people.");
    assert_eq!(trip["u-0001"].role, "user");
    assert_eq!(trip["u-0001"].model, None);
    assert_eq!(trip["u-0001"].created_at, DateTime::from_timestamp(1718000001, 500_000_000));
    assert_eq!(trip["a-0001"].role, "assistant");
    assert_eq!(trip["a-0001"].model.as_deref(), Some("openai/gpt-4o"));
    assert_eq!(trip["a-0002b2"].model.as_deref(), Some("openai/gpt-4o-mini"));
    // The image pointer becomes a note before the question.
    assert_eq!(text_of(trip["u-0003"]), format!("{IMAGE_NOTE}\n\nWhat is this building?"));
    // Code addressed to a tool: a fenced block, saying where it went.
    let code = text_of(trip["a-0004"]);
    assert!(code.starts_with("[to python]\n\n```python\nhotel = 3 * 95\n"), "{code}");
    assert!(code.ends_with("\n```"), "{code}");
    // The tool's output: an assistant-side note naming the tool.
    assert_eq!(trip["t-0004"].role, "assistant");
    assert_eq!(trip["t-0004"].model, None);
    assert_eq!(text_of(trip["t-0004"]), "[output of python]\n\n```\nTotal: 430 EUR\n```");
    assert_eq!(
        trip["u-0001"].parts,
        json!([{"type": "text", "text": "Plan a 3-day trip to Lisbon for two people."}])
    );
    assert_eq!(sessions[0].created_at.map(|t| t.timestamp()), Some(1718000000));

    let sky = by_id(&sessions[1]);
    // Reasoning becomes a thought part, in the Part shape Arbor stores.
    assert_eq!(
        sky["th-0001"].parts,
        json!([{"type": "thought", "text": "Recalling Rayleigh scattering\n\nScattering goes as the inverse \
                fourth power of wavelength, so blue scatters more than red.", "signature": null, "redacted": null}])
    );
    assert_eq!(sky["rr-0001"].parts[0]["type"], "thought");
    assert_eq!(sky["rr-0001"].parts[0]["text"], "Thought for 4 seconds");
    assert_eq!(sky["ans-0001"].model.as_deref(), Some("openai/o3"));
    for message in &sessions[1].messages {
        let parts: Vec<Part> = serde_json::from_value(message.parts.clone()).unwrap();
        assert!(!parts.is_empty());
    }
}

#[test]
fn chatgpt_hidden_entries_hand_their_children_up() {
    // The hidden system root has two children (the first prompt was edited), and a hidden entry
    // sits between a prompt and its reply.
    let mut hidden = gpt_node("h", Some("root"), &["u1", "u2"], "system", "secret");
    hidden["message"]["metadata"]["is_visually_hidden_from_conversation"] = json!(true);
    let mut middle = gpt_node("mid", Some("u2"), &["a2"], "assistant", "");
    middle["message"]["content"]["parts"] = json!([""]);
    let doc = gpt_conv(
        "Hidden",
        vec![
            gpt_node("root", None, &["h"], "", ""),
            hidden,
            gpt_node("u1", Some("h"), &[], "user", "first try"),
            gpt_node("u2", Some("h"), &["mid"], "user", "second try"),
            middle,
            gpt_node("a2", Some("mid"), &[], "assistant", "answer"),
        ],
        Some("a2"),
    );
    let sessions = from_chatgpt(&doc).unwrap();
    let s = &sessions[0];
    let ids: Vec<&str> = s.messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["u1", "u2", "a2"]);
    assert_eq!(parent_of(s, "u1"), None);
    assert_eq!(parent_of(s, "u2"), None);
    assert_eq!(parent_of(s, "a2"), Some("u2"));
    assert_eq!(s.active_root.as_deref(), Some("u2"));
    assert_eq!(chosen_of(s, "u2"), Some("a2"));
}

// ---------------------------------------------------------------------------------------------
// Open WebUI fixture

#[test]
fn open_webui_keeps_every_branch() {
    let sessions = from_open_webui(&open_webui_fixture()).unwrap();
    assert_eq!(sessions.len(), 2);
    let rust = &sessions[0];
    assert_eq!(rust.title, "Rust lifetimes");
    // The empty system root is left out.
    assert_eq!(rust.messages.len(), 9);
    let parents = [
        ("m1", None),
        ("m2", Some("m1")),
        ("m3a", Some("m2")),
        ("m4a", Some("m3a")),
        ("m3b", Some("m2")),
        ("m4b1", Some("m3b")),
        ("m4b2", Some("m3b")),
        ("m5", Some("m4b2")),
        ("m6", Some("m5")),
    ];
    for (id, parent) in parents {
        assert_eq!(parent_of(rust, id), parent, "parent of {id}");
    }
    assert_parents_first(rust);
    assert_eq!(rust.active_root.as_deref(), Some("m1"));
    assert_eq!(chosen_of(rust, "m2"), Some("m3b"));
    assert_eq!(chosen_of(rust, "m3b"), Some("m4b2"));
    assert_eq!(chosen_of(rust, "m3a"), Some("m4a"));
    assert_eq!(active_path(rust), ["m1", "m2", "m3b", "m4b2", "m5", "m6"]);
    assert_eq!(rust.created_at, DateTime::from_timestamp(1719000000, 0));
    assert!(!rust.archived);

    let index = by_id(rust);
    assert_eq!(index["m4b1"].model.as_deref(), Some("open-webui/llama3.1:8b"));
    assert_eq!(index["m4b2"].model.as_deref(), Some("open-webui/qwen2.5-coder:14b"));
    assert!(text_of(index["m4b2"]).contains("```rust\nstruct Excerpt<'a> {"));
    assert_eq!(
        text_of(index["m5"]),
        format!(
            "{IMAGE_NOTE}\n\n[file \"main.rs\" not included in the export]\n\nWhy does this error happen?"
        )
    );
    assert_eq!(index["m5"].created_at, DateTime::from_timestamp(1719000400, 0));
    for message in &rust.messages {
        assert_eq!((message.kind.as_str(), message.status.as_str()), ("text", "complete"));
    }

    let hi = &sessions[1];
    assert_eq!(hi.title, DEFAULT_TITLE);
    assert!(hi.archived);
    assert_eq!(hi.messages.len(), 2);
    assert_eq!(hi.active_root.as_deref(), Some("n1"));
}

#[test]
fn open_webui_accepts_a_single_chat_and_the_older_unwrapped_form() {
    let fixture = open_webui_fixture();
    let single = from_open_webui(&fixture[0]).unwrap();
    assert_eq!(single.len(), 1);
    assert_eq!(single[0].messages.len(), 9);
    assert_eq!(detect(&fixture[0]), Some(ForeignFormat::OpenWebUi));

    let unwrapped = fixture[0]["chat"].clone();
    assert_eq!(detect(&unwrapped), Some(ForeignFormat::OpenWebUi));
    let sessions = from_open_webui(&json!([unwrapped])).unwrap();
    assert_eq!(sessions[0].title, "Rust lifetimes");
    assert_eq!(sessions[0].messages.len(), 9);
}

#[test]
fn open_webui_first_message_edited_gives_two_roots() {
    let doc = owu_chat(
        "Roots",
        vec![
            owu_msg("r1", None, &["a1"], "user", "first"),
            owu_msg("a1", Some("r1"), &[], "assistant", "one"),
            owu_msg("r2", None, &["a2"], "user", "first, edited"),
            owu_msg("a2", Some("r2"), &[], "assistant", "two"),
        ],
        Some("a1"),
    );
    let sessions = from_open_webui(&doc).unwrap();
    let s = &sessions[0];
    assert_eq!(s.messages.len(), 4);
    assert_eq!(s.active_root.as_deref(), Some("r1"));
    assert_parents_first(s);
}

// ---------------------------------------------------------------------------------------------
// Shape and order

#[test]
fn detect_tells_the_formats_apart() {
    assert_eq!(detect(&chatgpt_fixture()), Some(ForeignFormat::ChatGpt));
    assert_eq!(detect(&chatgpt_fixture()[0]), Some(ForeignFormat::ChatGpt));
    assert_eq!(detect(&open_webui_fixture()), Some(ForeignFormat::OpenWebUi));
    assert_eq!(detect(&json!([])), None);
    assert_eq!(detect(&json!({"format": 1, "workspaces": []})), None);
    assert_eq!(detect(&json!("conversations")), None);
    assert_eq!(detect(&json!([1, 2])), None);
    assert_eq!(detect(&json!([{"chat": {"messages": []}}])), None);
    // Each converter refuses the other's export, saying what is missing.
    let err = from_chatgpt(&open_webui_fixture()).unwrap_err();
    assert!(err.contains("conversation 1 (\"Rust lifetimes\")") && err.contains("mapping"), "{err}");
    let err = from_open_webui(&chatgpt_fixture()).unwrap_err();
    assert!(err.contains("conversation 1 (\"Trip plan to Lisbon\")") && err.contains("history"), "{err}");
    let err = from_chatgpt(&json!(42)).unwrap_err();
    assert!(err.contains("not a ChatGPT export"), "{err}");
}

#[test]
fn parents_come_first_whatever_the_map_order() {
    // Keys sort child-first ("a" < "b" < "c"), the opposite of the tree.
    let doc = gpt_conv(
        "Order",
        vec![
            gpt_node("c", None, &["b"], "user", "1"),
            gpt_node("b", Some("c"), &["a"], "assistant", "2"),
            gpt_node("a", Some("b"), &[], "user", "3"),
        ],
        Some("a"),
    );
    let sessions = from_chatgpt(&doc).unwrap();
    let ids: Vec<&str> = sessions[0].messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["c", "b", "a"]);
}

#[test]
fn parents_are_trusted_over_children_lists() {
    // "a" lists "b" as its child, but "b" names "root" as its parent: the parent wins, and the
    // children list still orders "root"'s children ("b" before "a" although "a" sorts first).
    let doc = gpt_conv(
        "Disagree",
        vec![
            gpt_node("root", None, &["b", "a"], "user", "q"),
            gpt_node("a", Some("root"), &["b"], "assistant", "one"),
            gpt_node("b", Some("root"), &[], "assistant", "two"),
        ],
        None,
    );
    let sessions = from_chatgpt(&doc).unwrap();
    let s = &sessions[0];
    assert_eq!(parent_of(s, "b"), Some("root"));
    assert_eq!(chosen_of(s, "a"), None);
    // No current node: the last child is chosen.
    assert_eq!(chosen_of(s, "root"), Some("a"));
    let ids: Vec<&str> = s.messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["root", "b", "a"]);
}

#[test]
fn titles_are_cut_and_defaulted() {
    assert_eq!(clean_title(Some(&json!("a".repeat(500)))).chars().count(), MAX_TITLE_CHARS);
    assert_eq!(clean_title(Some(&json!("é".repeat(500)))).chars().count(), MAX_TITLE_CHARS);
    assert_eq!(clean_title(Some(&json!("  Trip\n\tplan  "))), "Trip plan");
    assert_eq!(clean_title(Some(&json!(" \n "))), DEFAULT_TITLE);
    assert_eq!(clean_title(Some(&json!(null))), DEFAULT_TITLE);
    assert_eq!(clean_title(None), DEFAULT_TITLE);
    let doc = gpt_conv(&"x".repeat(300), vec![gpt_node("u", None, &[], "user", "hi")], Some("u"));
    assert_eq!(from_chatgpt(&doc).unwrap()[0].title.len(), MAX_TITLE_CHARS);
}

#[test]
fn code_fences_outlast_the_backticks_inside() {
    assert_eq!(fenced("let s = \"```\";", Some("rust")), "````rust\nlet s = \"```\";\n````");
    assert_eq!(fenced("x\n", Some("unknown")), "```\nx\n```");
    assert_eq!(fenced("x", Some("py thon\n```")), "```\nx\n```");
    assert_eq!(fenced("  \n", Some("python")), "");
}

#[test]
fn timestamps_accept_seconds_milliseconds_and_text() {
    let t = DateTime::from_timestamp(1719000000, 0);
    assert_eq!(timestamp(Some(&json!(1719000000))), t);
    assert_eq!(timestamp(Some(&json!(1719000000000_u64))), t);
    assert_eq!(timestamp(Some(&json!("2024-06-21T20:00:00Z"))), t);
    assert_eq!(timestamp(Some(&json!(-5))), None);
    assert_eq!(timestamp(Some(&json!(1e300))), None);
    assert_eq!(timestamp(Some(&json!(null))), None);
}

// ---------------------------------------------------------------------------------------------
// Refusals

#[test]
fn a_loop_is_refused() {
    let doc = gpt_conv(
        "Loop",
        vec![
            gpt_node("r", None, &["x"], "user", "hi"),
            gpt_node("x", Some("r"), &[], "assistant", "hello"),
            gpt_node("p", Some("q"), &["q"], "user", "a"),
            gpt_node("q", Some("p"), &["p"], "assistant", "b"),
        ],
        Some("x"),
    );
    let err = from_chatgpt(&doc).unwrap_err();
    assert!(err.starts_with("conversation 1 (\"Loop\"): message "), "{err}");
    assert!(err.contains("is its own ancestor"), "{err}");
    assert!(err.contains("\"p\"") || err.contains("\"q\""), "{err}");

    // A message that is its own parent.
    let doc = owu_chat("Self", vec![owu_msg("s", Some("s"), &["s"], "user", "me")], None);
    let err = from_open_webui(&doc).unwrap_err();
    assert!(err.contains("conversation 1 (\"Self\"): message \"s\" is its own ancestor"), "{err}");
}

#[test]
fn a_dangling_parent_is_refused() {
    let doc = gpt_conv("Trip plan", vec![gpt_node("abc", Some("zzz"), &[], "user", "hi")], None);
    let err = from_chatgpt(&doc).unwrap_err();
    assert_eq!(
        err,
        "conversation 1 (\"Trip plan\"): message \"abc\" names the parent \"zzz\", which is not in the export."
    );
    let doc = owu_chat("Trip plan", vec![owu_msg("abc", Some("zzz"), &[], "user", "hi")], None);
    let err = from_open_webui(&doc).unwrap_err();
    assert!(err.contains("names the parent \"zzz\""), "{err}");
}

#[test]
fn a_missing_child_is_refused() {
    let doc = gpt_conv("Ghost", vec![gpt_node("abc", None, &["ghost"], "user", "hi")], None);
    let err = from_chatgpt(&doc).unwrap_err();
    assert!(
        err.contains("conversation 1 (\"Ghost\"): message \"abc\" lists the child \"ghost\", which is not in the export"),
        "{err}"
    );
    let doc = owu_chat("Ghost", vec![owu_msg("abc", None, &["ghost"], "user", "hi")], None);
    assert!(from_open_webui(&doc).unwrap_err().contains("lists the child \"ghost\""));
}

#[test]
fn a_missing_current_message_is_refused() {
    let doc = gpt_conv("Current", vec![gpt_node("abc", None, &[], "user", "hi")], Some("nope"));
    let err = from_chatgpt(&doc).unwrap_err();
    assert!(err.contains("the current message \"nope\" is not in the export"), "{err}");
}

#[test]
fn a_duplicate_id_is_refused() {
    // Two entries claiming one id (a parsed JSON object cannot repeat a key).
    let mut doc = gpt_conv(
        "Twice",
        vec![gpt_node("x", None, &[], "user", "one"), gpt_node("k", Some("x"), &[], "assistant", "two")],
        None,
    );
    doc[0]["mapping"]["k"]["id"] = json!("x");
    let err = from_chatgpt(&doc).unwrap_err();
    assert!(err.contains("conversation 1 (\"Twice\"): the message id \"x\" is used twice"), "{err}");

    let mut doc = owu_chat(
        "Twice",
        vec![owu_msg("x", None, &[], "user", "one"), owu_msg("k", Some("x"), &[], "assistant", "two")],
        None,
    );
    doc[0]["chat"]["history"]["messages"]["k"]["id"] = json!("x");
    assert!(from_open_webui(&doc).unwrap_err().contains("the message id \"x\" is used twice"));

    // An id that disagrees with its key, without clashing.
    let mut doc = gpt_conv("Mismatch", vec![gpt_node("k", None, &[], "user", "one")], None);
    doc[0]["mapping"]["k"]["id"] = json!("other");
    let err = from_chatgpt(&doc).unwrap_err();
    assert!(
        err.contains("the entry stored under \"k\" says its id is \"other\"; the two must match"),
        "{err}"
    );
}

#[test]
fn an_unknown_role_is_refused() {
    let doc = gpt_conv("Roles", vec![gpt_node("abc", None, &[], "critic", "hmm")], None);
    let err = from_chatgpt(&doc).unwrap_err();
    assert!(
        err.contains("conversation 1 (\"Roles\"): message \"abc\" has the author role \"critic\""),
        "{err}"
    );
    let doc = owu_chat("Roles", vec![owu_msg("abc", None, &[], "function", "hmm")], None);
    let err = from_open_webui(&doc).unwrap_err();
    assert!(err.contains("message \"abc\" has the role \"function\""), "{err}");
    let mut doc = owu_chat("Roles", vec![owu_msg("abc", None, &[], "user", "hmm")], None);
    doc[0]["chat"]["history"]["messages"]["abc"].as_object_mut().unwrap().remove("role");
    assert!(from_open_webui(&doc).unwrap_err().contains("names no role"));
}

#[test]
fn an_unknown_content_type_is_refused() {
    let mut doc = gpt_conv("Kinds", vec![gpt_node("abc", None, &[], "assistant", "x")], None);
    doc[0]["mapping"]["abc"]["message"]["content"] = json!({"content_type": "hologram", "parts": ["x"]});
    let err = from_chatgpt(&doc).unwrap_err();
    assert!(
        err.contains("conversation 1 (\"Kinds\"): message \"abc\" has the content type \"hologram\""),
        "{err}"
    );
}

#[test]
fn too_many_conversations_are_refused() {
    let doc = Value::Array(vec![json!({}); MAX_CONVERSATIONS + 1]);
    let err = from_chatgpt(&doc).unwrap_err();
    assert!(err.contains("10001 conversations") && err.contains("10000"), "{err}");
    let err = from_open_webui(&doc).unwrap_err();
    assert!(err.contains("10001 conversations") && err.contains("10000"), "{err}");
}

#[test]
fn too_many_messages_in_a_conversation_are_refused() {
    let err = from_chatgpt(&gpt_chain(MAX_MESSAGES_PER_CONVERSATION + 1)).unwrap_err();
    assert!(err.contains("conversation 1 (\"Long\"): it holds 20001 messages, more than the 20000"), "{err}");
    let err = from_open_webui(&owu_chain(MAX_MESSAGES_PER_CONVERSATION + 1)).unwrap_err();
    assert!(err.contains("it holds 20001 messages, more than the 20000"), "{err}");
    // Entries, hidden or not, are capped before anything is read.
    let err = from_chatgpt(&gpt_chain(MAX_ENTRIES_PER_CONVERSATION + 1)).unwrap_err();
    assert!(err.contains("it has 40001 entries, more than the 40000"), "{err}");
}

#[test]
fn too_many_messages_in_all_are_refused() {
    // The fixture holds 13 + 4 messages; a cap of 15 is passed in the second conversation.
    let limits = Limits { messages_total: 15, ..LIMITS };
    let err = convert(&chatgpt_fixture(), "a ChatGPT export", &limits, chatgpt_conversation).unwrap_err();
    assert!(
        err.contains(
            "conversation 2 (\"Why is the sky blue?\"): it brings the export to 17 messages, more than the 15"
        ),
        "{err}"
    );
    let limits = Limits { messages_total: 10, ..LIMITS };
    let err =
        convert(&open_webui_fixture(), "an Open WebUI export", &limits, open_webui_conversation).unwrap_err();
    assert!(err.contains("conversation 2") && err.contains("11 messages, more than the 10"), "{err}");
}

#[test]
fn an_oversized_message_is_refused() {
    let big = "x".repeat(MAX_MESSAGE_TEXT_BYTES + 1);
    let doc = gpt_conv("Big", vec![gpt_node("abc", None, &[], "user", &big)], None);
    let err = from_chatgpt(&doc).unwrap_err();
    assert!(
        err.contains(
            "conversation 1 (\"Big\"): message \"abc\" holds 1048577 bytes of text, more than the 1048576"
        ),
        "{err}"
    );
    let doc = owu_chat("Big", vec![owu_msg("abc", None, &[], "assistant", &big)], None);
    assert!(from_open_webui(&doc).unwrap_err().contains("holds 1048577 bytes of text"));
    // Exactly at the cap is fine.
    let doc = gpt_conv("Big", vec![gpt_node("abc", None, &[], "user", &big[1..])], None);
    assert!(from_chatgpt(&doc).is_ok());
}

#[test]
fn a_deep_chain_converts_without_deep_recursion() {
    // On a small stack: a recursive walk of 20,000 levels would not fit.
    let run = |doc: Value, chatgpt: bool| {
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || if chatgpt { from_chatgpt(&doc) } else { from_open_webui(&doc) })
            .unwrap()
            .join()
            .unwrap()
    };
    for chatgpt in [true, false] {
        let len = MAX_MESSAGES_PER_CONVERSATION;
        let doc = if chatgpt { gpt_chain(len) } else { owu_chain(len) };
        let sessions = run(doc, chatgpt).unwrap();
        let s = &sessions[0];
        assert_eq!(s.messages.len(), len);
        assert_eq!(s.messages[0].id, "n0");
        assert_eq!(s.messages[len - 1].id, format!("n{}", len - 1));
        assert_eq!(s.messages[len - 1].parent, Some(format!("n{}", len - 2)));
        assert_eq!(s.active_root.as_deref(), Some("n0"));
        assert_parents_first(s);
    }
}
