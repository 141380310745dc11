#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::time::SystemTime;

fn store() -> (tempfile::TempDir, BlobStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = BlobStore::new(dir.path().join("blobs")).unwrap();
    (dir, store)
}

fn temp_count(store: &BlobStore) -> usize {
    std::fs::read_dir(&store.dirs.tmp).unwrap().count()
}

#[tokio::test]
async fn put_then_read_round_trips() {
    let (_dir, store) = store();
    let stored = store.put(b"hello blob").await.unwrap();
    assert!(valid_hash(&stored.hash));
    assert_eq!(stored.size, 10);
    assert_eq!(stored.kind, Kind::Text);
    assert!(stored.created);
    assert_eq!(store.read(&stored.hash).await.unwrap(), b"hello blob");
    assert!(store.exists(&stored.hash).await);
    let path = store.path_of(&stored.hash).unwrap();
    let rel = path.strip_prefix(&store.dirs.root).unwrap();
    let expected: PathBuf = [&stored.hash[..2], &stored.hash[2..4], &stored.hash[..]].iter().collect();
    assert_eq!(rel, expected);
    assert!(std::fs::metadata(&path).unwrap().permissions().readonly(), "blobs are read-only");
    assert_eq!(temp_count(&store), 0);
}

#[tokio::test]
async fn known_sha512_256_vector() {
    let (_dir, store) = store();
    let stored = store.put(b"abc").await.unwrap();
    // FIPS 180-4 example for SHA-512/256.
    assert_eq!(stored.hash, "53048e2681941ef99b2e29b76b4c7dabe4c2d0c634fc6d46e0e2f13107e7af23");
}

#[tokio::test]
async fn same_bytes_twice_is_one_file() {
    let (_dir, store) = store();
    let first = store.put(b"same bytes").await.unwrap();
    let second = store.put(b"same bytes").await.unwrap();
    assert!(first.created);
    assert!(!second.created);
    assert_eq!(first.hash, second.hash);
    assert_eq!(store.list().await.unwrap(), vec![first.hash.clone()]);
    assert_eq!(temp_count(&store), 0);
}

#[tokio::test]
async fn empty_blob_is_fine() {
    let (_dir, store) = store();
    let stored = store.put(b"").await.unwrap();
    assert_eq!(stored.size, 0);
    assert_eq!(store.read(&stored.hash).await.unwrap(), b"");
}

#[tokio::test]
async fn a_damaged_copy_is_replaced() {
    let (_dir, store) = store();
    let stored = store.put(b"the real content").await.unwrap();
    let path = store.path_of(&stored.hash).unwrap();
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, b"trunc").unwrap();
    let again = store.put(b"the real content").await.unwrap();
    assert!(!again.created);
    assert_eq!(store.read(&stored.hash).await.unwrap(), b"the real content");
}

#[test]
fn bad_hashes_are_refused() {
    let (_dir, store) = store();
    let good = "a".repeat(64);
    assert!(valid_hash(&good));
    assert!(store.path_of(&good).is_ok());
    let bad = [
        String::new(),
        "a".repeat(63),
        "a".repeat(65),
        "A".repeat(64),
        format!("{}G", "a".repeat(63)),
        format!("..{}", "a".repeat(62)),
        format!("../{}", "a".repeat(61)),
        format!("%2f{}", "a".repeat(61)),
        format!("/./{}", "a".repeat(61)),
        format!("{}\0", "a".repeat(63)),
        format!("{}/", "a".repeat(63)),
        format!("{}\\", "a".repeat(63)),
        format!(" {}", "a".repeat(63)),
        // 64 bytes but not 64 ASCII characters.
        format!("é{}", "a".repeat(62)),
        "..".into(),
        "/etc/passwd".into(),
    ];
    for hash in &bad {
        assert!(!valid_hash(hash), "{hash:?}");
        assert!(matches!(store.path_of(hash), Err(BlobError::BadHash)), "{hash:?}");
    }
}

#[tokio::test]
async fn bad_hashes_are_refused_by_every_method() {
    let (_dir, store) = store();
    for hash in ["", "..", "../../etc/passwd", "%2f", "/./", &"0".repeat(65)] {
        assert!(matches!(store.read(hash).await, Err(BlobError::BadHash)));
        assert!(matches!(store.delete(hash).await, Err(BlobError::BadHash)));
        assert!(!store.exists(hash).await);
    }
}

#[tokio::test]
async fn missing_blob_is_not_found() {
    let (_dir, store) = store();
    let hash = "0".repeat(64);
    assert!(matches!(store.read(&hash).await, Err(BlobError::NotFound)));
    assert!(!store.exists(&hash).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_puts_of_the_same_bytes() {
    let (_dir, store) = store();
    let bytes: Vec<u8> = (0..1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let hash = hash_of(&bytes);
    let path = store.path_of(&hash).unwrap();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // A reader racing the writers must only ever see the whole file or nothing.
    let watcher = {
        let (path, bytes, done) = (path.clone(), bytes.clone(), done.clone());
        tokio::task::spawn_blocking(move || {
            let mut seen = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                if let Ok(found) = std::fs::read(&path) {
                    assert!(found == bytes, "a partial file was visible");
                    seen += 1;
                }
            }
            seen
        })
    };
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let (store, bytes) = (store.clone(), bytes.clone());
            tokio::spawn(async move { store.put_owned(bytes).await.unwrap() })
        })
        .collect();
    let mut created = 0;
    for task in tasks {
        let stored = task.await.unwrap();
        assert_eq!(stored.hash, hash);
        created += usize::from(stored.created);
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    watcher.await.unwrap();
    assert_eq!(created, 1, "exactly one put creates the blob");
    assert_eq!(store.list().await.unwrap(), vec![hash.clone()]);
    assert_eq!(store.read(&hash).await.unwrap(), bytes);
    assert_eq!(temp_count(&store), 0, "no temp files left");
}

#[tokio::test]
async fn delete_is_idempotent() {
    let (_dir, store) = store();
    let stored = store.put(b"to be deleted").await.unwrap();
    store.delete(&stored.hash).await.unwrap();
    assert!(!store.exists(&stored.hash).await);
    store.delete(&stored.hash).await.unwrap();
    assert!(matches!(store.read(&stored.hash).await, Err(BlobError::NotFound)));
    // And it can come back.
    assert!(store.put(b"to be deleted").await.unwrap().created);
}

#[tokio::test]
async fn list_finds_exactly_the_stored_hashes() {
    let (_dir, store) = store();
    assert!(store.list().await.unwrap().is_empty());
    let mut expected = Vec::new();
    for content in [&b"one"[..], b"two", b"three"] {
        expected.push(store.put(content).await.unwrap().hash);
    }
    expected.sort();
    let root = store.dirs.root.clone();
    let h = &expected[0];
    let level2 = root.join(&h[..2]).join(&h[2..4]);
    std::fs::write(level2.join("notahash"), b"x").unwrap();
    std::fs::write(level2.join(h.to_uppercase()), b"x").unwrap();
    std::fs::write(level2.join(format!("{h}.tmp")), b"x").unwrap();
    std::fs::create_dir(level2.join("f".repeat(64))).unwrap();
    // A valid hash in the wrong directory is not a stored blob.
    std::fs::create_dir_all(root.join("00").join("00")).unwrap();
    std::fs::write(root.join("00").join("00").join("f".repeat(64)), b"x").unwrap();
    std::fs::create_dir_all(root.join("zz").join("zz")).unwrap();
    std::fs::create_dir_all(root.join("AB")).unwrap();
    std::fs::write(root.join("ab"), b"a file where a directory would be").unwrap();
    std::fs::write(root.join("tmp").join("0".repeat(64)), b"x").unwrap();
    std::fs::write(root.join("README"), b"x").unwrap();
    assert_eq!(store.list().await.unwrap(), expected);
}

#[test]
fn stale_temp_files_are_removed_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("blobs");
    let store = BlobStore::new(root.clone()).unwrap();
    let old = store.dirs.tmp.join("old.tmp");
    let fresh = store.dirs.tmp.join("fresh.tmp");
    std::fs::write(&old, b"x").unwrap();
    std::fs::write(&fresh, b"x").unwrap();
    let two_hours_ago = SystemTime::now() - Duration::from_secs(2 * 60 * 60);
    File::options().write(true).open(&old).unwrap().set_modified(two_hours_ago).unwrap();
    BlobStore::new(root).unwrap();
    assert!(!old.exists());
    assert!(fresh.exists(), "an upload in progress keeps its temp file");
}

fn chunks(parts: &[&[u8]]) -> impl Stream<Item = Result<Bytes, std::io::Error>> + use<> {
    let items: Vec<_> = parts.iter().map(|p| Ok(Bytes::copy_from_slice(p))).collect();
    futures_util::stream::iter(items)
}

#[tokio::test]
async fn put_stream_matches_put() {
    let (_dir, store) = store();
    let stored = store.put_stream(chunks(&[b"a", b"b", b"c"]), 3).await.unwrap();
    assert_eq!(stored.hash, "53048e2681941ef99b2e29b76b4c7dabe4c2d0c634fc6d46e0e2f13107e7af23");
    assert_eq!(stored.size, 3);
    assert_eq!(stored.kind, Kind::Text);
    assert!(stored.created);
    assert!(!store.put(b"abc").await.unwrap().created);
    assert_eq!(temp_count(&store), 0);
}

#[tokio::test]
async fn put_stream_sniffs_the_head() {
    let (_dir, store) = store();
    let mut big = b"%PDF-1.7\n".to_vec();
    big.resize(200_000, b'x');
    let stored = store.put_stream(chunks(&[&big[..10], &big[10..70_000], &big[70_000..]]), 1 << 20).await;
    assert_eq!(stored.unwrap().kind, Kind::Pdf);
    // A multi-byte character cut by the 64 KiB sniffing window is still text.
    let mut text = "a".repeat(sniff::SNIFF_LEN - 1).into_bytes();
    text.extend_from_slice("ééé".as_bytes());
    let stored = store.put_stream(chunks(&[&text]), 1 << 20).await.unwrap();
    assert_eq!(stored.kind, Kind::Text);
}

#[tokio::test]
async fn put_stream_over_the_limit_is_too_large() {
    let (_dir, store) = store();
    let result = store.put_stream(chunks(&[b"12345", b"67890", b"x"]), 10).await;
    assert!(matches!(result, Err(BlobError::TooLarge)));
    assert!(store.list().await.unwrap().is_empty());
    assert_eq!(temp_count(&store), 0);
}

#[tokio::test]
async fn put_stream_error_is_interrupted() {
    let (_dir, store) = store();
    let items = vec![Ok(Bytes::from_static(b"partial")), Err(std::io::Error::other("reset"))];
    let result = store.put_stream(futures_util::stream::iter(items), 100).await;
    assert!(matches!(result, Err(BlobError::Interrupted)));
    assert!(store.list().await.unwrap().is_empty());
    assert_eq!(temp_count(&store), 0);
}

#[tokio::test]
async fn cancelled_put_stream_leaves_no_temp_file() {
    let (_dir, store) = store();
    let stalled = futures_util::stream::iter(vec![Ok::<_, std::io::Error>(Bytes::from_static(b"part"))])
        .chain(futures_util::stream::pending());
    let result = tokio::time::timeout(Duration::from_millis(200), store.put_stream(stalled, 100)).await;
    assert!(result.is_err(), "the stream never ends");
    assert_eq!(temp_count(&store), 0);
    assert!(store.list().await.unwrap().is_empty());
}

#[test]
fn error_messages_name_no_paths() {
    let e = BlobError::from(std::io::Error::other("/secret/data/dir: permission denied"));
    assert_eq!(e.to_string(), "the file could not be stored");
    assert!(std::error::Error::source(&e).is_some(), "the cause stays available for logs");
}

#[tokio::test]
async fn a_staged_file_is_read_back_or_dropped_without_a_trace() {
    let (_dir, store) = store();
    let mut staging = store.stage().await.unwrap();
    staging.write(b"%PDF-1.7\n").await.unwrap();
    staging.write(b"rest").await.unwrap();
    assert_eq!(staging.size(), 13);
    assert_eq!(temp_count(&store), 1);
    let staged = staging.finish().await.unwrap();
    assert_eq!(staged.kind(), Kind::Pdf);
    assert_eq!(staged.hash(), hash_of(b"%PDF-1.7\nrest"));
    assert_eq!(staged.into_bytes().await.unwrap(), b"%PDF-1.7\nrest");
    assert_eq!(temp_count(&store), 0, "read back, the temp file goes");
    assert!(store.list().await.unwrap().is_empty(), "and nothing was stored");
    let mut staging = store.stage().await.unwrap();
    staging.write(b"abandoned").await.unwrap();
    drop(staging);
    assert_eq!(temp_count(&store), 0);
}
