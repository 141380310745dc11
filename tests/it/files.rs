//! Attachments over HTTP: upload, attach, send to the model, serve only to reference holders,
//! deduplicate without telling, count references, collect what nothing refers to.

use arbor::domain::accounts::{Actor, Role};
use uuid::Uuid;

use crate::agent::says;
use crate::runs::{Chat, chat_with};
use crate::support::TestSession;
use crate::support::mock_upstream::Provider;
use crate::support::urlencode;

const MODEL: &str = "openai/gpt-4o-mini";

/// A 2×2 PNG made by the image crate's encoder.
pub(crate) fn png() -> Vec<u8> {
    let img = image::RgbImage::from_pixel(2, 2, image::Rgb([200, 10, 10]));
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

pub(crate) async fn upload(c: &Chat, s: &TestSession, name: &str, bytes: Vec<u8>) -> reqwest::Response {
    c.app
        .client
        .post(c.app.url(&format!("/uploads?name={}", urlencode(name))))
        .header("Origin", c.app.origin())
        .header("Cookie", &s.cookie)
        .header("X-CSRF-Token", &s.csrf)
        .body(bytes)
        .send()
        .await
        .unwrap()
}

/// The upload id and blob hash in an upload's chip.
pub(crate) fn chip_ids(html: &str) -> (Uuid, String) {
    let at = html.find("data-upload=\"").unwrap() + "data-upload=\"".len();
    let id = Uuid::parse_str(&html[at..at + 36]).unwrap();
    let hash = html.find("/blobs/").map(|i| html[i + 7..i + 7 + 64].to_string()).unwrap_or_default();
    (id, hash)
}

pub(crate) async fn send_with(c: &Chat, text: &str, uploads: &[Uuid]) -> reqwest::Response {
    let ids: Vec<String> = uploads.iter().map(Uuid::to_string).collect();
    let body = format!(
        "{}&attachments={}",
        crate::runs::form(text, &Uuid::new_v4().simple().to_string(), MODEL),
        ids.join("%2C")
    );
    c.app.post_form(&format!("/s/{}/messages", c.session), &body, Some(&c.s)).await
}

pub(crate) fn hash_of(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha512_256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_image_reaches_the_model_and_is_served_inline_to_its_owner_only() {
    let c = chat_with(|_| {}).await;
    let res = upload(&c, &c.s, "photo.png", png()).await;
    assert_eq!(res.status(), 200);
    let (id, _) = chip_ids(&res.text().await.unwrap());
    let hash = hash_of(&png());

    c.mock.enqueue(Provider::OpenAi, says("A tiny image."));
    let res = send_with(&c, "What is this?", &[id]).await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    assert!(html.contains(&format!("/blobs/{hash}")), "{html}");
    let answer = crate::runs::streaming_id(&html);
    c.settled(answer).await;
    // The model got the image as an image part, then the text.
    let body = c.mock.requests_for(Provider::OpenAi)[0].json().unwrap();
    let content = &body["messages"].as_array().unwrap().last().unwrap()["content"];
    assert_eq!(content[0]["type"], "image_url", "{content}");
    assert!(content[0]["image_url"]["url"].as_str().unwrap().starts_with("data:image/png;base64,"));
    assert_eq!(content[1]["text"], "What is this?");

    // Served inline to the owner; everyone else, admins included, is told it does not exist.
    let res = c.app.get(&format!("/blobs/{hash}"), Some(&c.s.cookie)).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "image/png");
    assert!(res.headers()["content-disposition"].to_str().unwrap().starts_with("inline"));
    assert_eq!(res.bytes().await.unwrap().to_vec(), png());
    let bob = c.app.create_user("bob@example.com", Role::Member).await;
    let bob_s = c.app.login_full(&bob).await;
    assert_eq!(c.app.get(&format!("/blobs/{hash}"), Some(&bob_s.cookie)).await.status(), 404);
    let admin = c.app.create_user("root@example.com", Role::Admin).await;
    assert_eq!(c.app.get(&format!("/blobs/{hash}"), Some(&c.app.login(&admin).await)).await.status(), 404);
    assert_eq!(c.app.get(&format!("/blobs/{hash}"), None).await.status(), 401);
}

/// A submit reads whether its session has files with the session's messages: without any, its
/// reply looks none up; once a message has one, every later reply still sends it, also after a
/// post that brings none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_reply_still_sends_an_earlier_file_and_a_session_without_files_has_none_to_read() {
    use arbor::storage::repos::messages::session_messages_and_files;
    let c = chat_with(|_| {}).await;
    let db = &c.app.state.db;
    assert!(!session_messages_and_files(db, c.session).await.unwrap().1, "no messages yet");
    c.mock.enqueue(Provider::OpenAi, says("Hello to you."));
    let res = send_with(&c, "Hello", &[]).await;
    assert_eq!(res.status(), 200);
    c.settled(crate::runs::streaming_id(&res.text().await.unwrap())).await;
    let (messages, has_files) = session_messages_and_files(db, c.session).await.unwrap();
    assert_eq!((messages.len(), has_files), (2, false));

    let res = upload(&c, &c.s, "photo.png", png()).await;
    let (id, _) = chip_ids(&res.text().await.unwrap());
    c.mock.enqueue(Provider::OpenAi, says("A tiny image."));
    let res = send_with(&c, "What is this?", &[id]).await;
    assert_eq!(res.status(), 200);
    c.settled(crate::runs::streaming_id(&res.text().await.unwrap())).await;
    let (messages, has_files) = session_messages_and_files(db, c.session).await.unwrap();
    assert_eq!((messages.len(), has_files), (4, true));

    c.mock.enqueue(Provider::OpenAi, says("Still red."));
    let res = send_with(&c, "And its colour?", &[]).await;
    assert_eq!(res.status(), 200);
    c.settled(crate::runs::streaming_id(&res.text().await.unwrap())).await;
    let requests = c.mock.requests_for(Provider::OpenAi);
    assert_eq!(requests.len(), 3);
    let body = requests[2].json().unwrap();
    let asked: Vec<&serde_json::Value> =
        body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "user").collect();
    assert_eq!(asked.len(), 3, "{body}");
    assert_eq!(asked[0]["content"], "Hello", "{body}");
    assert_eq!(asked[1]["content"][0]["type"], "image_url", "the earlier image is sent again: {body}");
    assert_eq!(asked[1]["content"][1]["text"], "What is this?");
    assert_eq!(asked[2]["content"], "And its colour?", "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_bytes_give_each_user_a_reference_and_deleting_one_keeps_the_other() {
    let c = chat_with(|_| {}).await;
    let bytes = b"shared notes\nline two\n".to_vec();
    let hash = hash_of(&bytes);
    let bob = c.app.create_user("bob@example.com", Role::Member).await;
    let bob_s = c.app.login_full(&bob).await;
    // Bob cannot fetch what Ada uploaded, even knowing the hash.
    let res = upload(&c, &c.s, "notes.txt", bytes.clone()).await;
    assert_eq!(res.status(), 200);
    let ada_html = res.text().await.unwrap();
    let (ada_upload, _) = chip_ids(&ada_html);
    assert_eq!(c.app.get(&format!("/blobs/{hash}"), Some(&bob_s.cookie)).await.status(), 404);
    // Bob uploads the same bytes: an answer shaped exactly like Ada's, nothing about a copy.
    let res = upload(&c, &bob_s, "notes.txt", bytes.clone()).await;
    assert_eq!(res.status(), 200);
    let bob_html = res.text().await.unwrap();
    let (bob_upload, _) = chip_ids(&bob_html);
    assert_eq!(
        ada_html.replace(&ada_upload.to_string(), "ID"),
        bob_html.replace(&bob_upload.to_string(), "ID")
    );
    assert_eq!(c.app.get(&format!("/blobs/{hash}"), Some(&bob_s.cookie)).await.status(), 200);
    let blob = arbor::storage::repos::files::blob_row(&c.app.state.db, &hash).await.unwrap().unwrap();
    assert_eq!(blob.refcount, 2);

    // Ada sends hers, then deletes the session: Bob's reference keeps the blob.
    c.mock.enqueue(Provider::OpenAi, says("Read."));
    let res = send_with(&c, "Read this", &[ada_upload]).await;
    assert_eq!(res.status(), 200);
    c.settled(crate::runs::streaming_id(&res.text().await.unwrap())).await;
    // A text file reaches the model as text.
    let body = c.mock.requests_for(Provider::OpenAi)[0].json().unwrap();
    assert!(body["messages"].to_string().contains("shared notes"));
    let actor = Actor::for_tests(&c.user);
    c.app.state.sessions.delete_session(&actor, c.session).await.unwrap();
    assert_eq!(
        arbor::storage::repos::files::blob_row(&c.app.state.db, &hash).await.unwrap().unwrap().refcount,
        1
    );
    let mut settings = c.app.state.files.settings().clone();
    settings.gc_grace = std::time::Duration::ZERO;
    let gc = arbor::domain::files::Files::new(c.app.state.db.clone(), c.app.state.blobs.clone(), settings);
    let done = gc.collect().await.unwrap();
    assert_eq!(done.blobs, 0);
    assert_eq!(c.app.get(&format!("/blobs/{hash}"), Some(&bob_s.cookie)).await.status(), 200);
    assert_eq!(c.app.get(&format!("/blobs/{hash}"), Some(&c.s.cookie)).await.status(), 404);

    // Bob removes his upload: now nothing refers to it and collection removes it for good.
    let res = c.app.post_form(&format!("/uploads/{bob_upload}/delete"), "", Some(&bob_s)).await;
    assert_eq!(res.status(), 200);
    let done = gc.collect().await.unwrap();
    assert_eq!(done.blobs, 1);
    assert!(!c.app.state.blobs.exists(&hash).await);

    // And the other way round: the second uploader deletes first, the first keeps the file.
    let bytes = b"second shared file\n".to_vec();
    let hash = hash_of(&bytes);
    let (ada_upload, _) = chip_ids(&upload(&c, &c.s, "a.txt", bytes.clone()).await.text().await.unwrap());
    let (bob_upload, _) = chip_ids(&upload(&c, &bob_s, "b.txt", bytes.clone()).await.text().await.unwrap());
    let res = c.app.post_form(&format!("/uploads/{bob_upload}/delete"), "", Some(&bob_s)).await;
    assert_eq!(res.status(), 200);
    let done = gc.collect().await.unwrap();
    assert_eq!(done.blobs, 0);
    assert_eq!(
        arbor::storage::repos::files::blob_row(&c.app.state.db, &hash).await.unwrap().unwrap().refcount,
        1
    );
    assert_eq!(c.app.get(&format!("/blobs/{hash}"), Some(&c.s.cookie)).await.status(), 200);
    assert_eq!(c.app.get(&format!("/blobs/{hash}"), Some(&bob_s.cookie)).await.status(), 404);
    // Bob cannot delete Ada's upload either.
    let res = c.app.post_form(&format!("/uploads/{ada_upload}/delete"), "", Some(&bob_s)).await;
    assert_eq!(res.status(), 404);
    assert_eq!(c.app.get(&format!("/blobs/{hash}"), Some(&c.s.cookie)).await.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anything_but_a_verified_image_downloads_sandboxed_and_bad_input_is_refused() {
    let c = chat_with(|_| {}).await;
    // HTML dressed as a PNG, and an SVG with a script.
    for (name, bytes) in [
        ("x.png", b"<html><script>alert(1)</script></html>".to_vec()),
        (
            "../../../app/static/x.js",
            b"<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script></svg>".to_vec(),
        ),
    ] {
        let res = upload(&c, &c.s, name, bytes.clone()).await;
        assert_eq!(res.status(), 200);
        let hash = hash_of(&bytes);
        let res = c.app.get(&format!("/blobs/{hash}"), Some(&c.s.cookie)).await;
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["content-type"], "application/octet-stream");
        assert_eq!(res.headers()["x-content-type-options"], "nosniff");
        assert!(res.headers()["content-security-policy"].to_str().unwrap().starts_with("sandbox"));
        let disposition = res.headers()["content-disposition"].to_str().unwrap().to_string();
        assert!(disposition.starts_with("attachment;"), "{disposition}");
        assert!(!disposition.contains('/'), "the name is metadata, never a path: {disposition}");
    }
    // Hashes that are not hashes: 400 (or no route), never a panic or a file.
    for bad in [
        "xyz",
        &"A".repeat(64),
        &"0".repeat(63),
        &format!("{}%2f", "a".repeat(62)),
        "..%2F..%2Fetc%2Fpasswd",
        "%2e%2e%2f%2e%2e",
    ] {
        let status = c.app.get(&format!("/blobs/{bad}"), Some(&c.s.cookie)).await.status().as_u16();
        assert!(status == 400 || status == 404, "{bad}: {status}");
    }
    assert_eq!(c.app.get(&format!("/blobs/{}", "0".repeat(64)), Some(&c.s.cookie)).await.status(), 404);
    // Too large, and empty.
    let big = vec![b'a'; 21 * 1024 * 1024];
    assert_eq!(upload(&c, &c.s, "big.txt", big).await.status(), 413);
    assert_eq!(upload(&c, &c.s, "empty.txt", Vec::new()).await.status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn someone_elses_upload_cannot_be_attached_and_nothing_is_written() {
    let c = chat_with(|c| c.files.user_quota_mb = 1).await;
    let bob = c.app.create_user("bob@example.com", Role::Member).await;
    let bob_s = c.app.login_full(&bob).await;
    let (bobs, _) = chip_ids(&upload(&c, &bob_s, "b.txt", b"bob's".to_vec()).await.text().await.unwrap());
    let before = c.messages().await.len();
    let res = send_with(&c, "Take Bob's file", &[bobs]).await;
    assert_eq!(res.status(), 400);
    assert_eq!(c.messages().await.len(), before);
    // The storage limit: 1 MiB in all.
    let half = vec![b'x'; 600 * 1024];
    assert_eq!(upload(&c, &c.s, "a.txt", half.clone()).await.status(), 200);
    let mut other = half.clone();
    other[0] = b'y';
    let res = upload(&c, &c.s, "b.txt", other).await;
    // Refused from its declared length, before the body is read.
    assert_eq!(res.status(), 413);
    assert!(res.text().await.unwrap().contains("storage limit"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdf_goes_as_a_document_part_and_other_files_as_a_note() {
    use crate::support::mock_upstream::Reply;
    let c = chat_with(|_| {}).await;
    let pdf = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n".to_vec();
    let (pdf_id, _) = chip_ids(&upload(&c, &c.s, "report.pdf", pdf).await.text().await.unwrap());
    let (bin_id, _) = chip_ids(
        &upload(&c, &c.s, "data.bin", vec![0u8, 159, 146, 150, 1, 2, 3]).await.text().await.unwrap(),
    );
    c.mock.enqueue(Provider::Anthropic, Reply::fixture("anthropic/text.sse"));
    let ids: Vec<String> = [pdf_id, bin_id].iter().map(Uuid::to_string).collect();
    let body = format!(
        "{}&attachments={}",
        crate::runs::form("Summarise", "pdf-1", "anthropic/claude-sonnet-4-5"),
        ids.join("%2C")
    );
    let res = c.app.post_form(&format!("/s/{}/messages", c.session), &body, Some(&c.s)).await;
    assert_eq!(res.status(), 200);
    c.settled(crate::runs::streaming_id(&res.text().await.unwrap())).await;
    let sent = c.mock.requests_for(Provider::Anthropic)[0].json().unwrap();
    let content = &sent["messages"][0]["content"];
    let document =
        content.as_array().unwrap().iter().find(|b| b["type"] == "document").expect("a document block");
    assert_eq!(document["source"]["media_type"], "application/pdf");
    assert_eq!(document["title"], "report.pdf");
    assert!(content.to_string().contains("[Attached file: data.bin (application/octet-stream"), "{content}");
}
