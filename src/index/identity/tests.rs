use super::*;
use crate::index::SearchIndex;

#[test]
fn the_id_survives_reopening_and_rebuilding_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let first = {
        let (_index, fresh) = SearchIndex::open(dir.path()).unwrap();
        assert!(fresh);
        IndexId::of_dir(dir.path()).unwrap()
    };
    assert_eq!(std::fs::read_to_string(dir.path().join(ID_FILE)).unwrap().trim(), first.to_string());
    // Reopened: the same id.
    {
        let (_index, fresh) = SearchIndex::open(dir.path()).unwrap();
        assert!(!fresh);
        assert_eq!(IndexId::of_dir(dir.path()).unwrap(), first);
    }
    // Rebuilt (written under another schema version): the index is new, the id is not.
    std::fs::write(dir.path().join("arbor-search-version"), "arbor-search-0").unwrap();
    let (_index, fresh) = SearchIndex::open(dir.path()).unwrap();
    assert!(fresh);
    assert_eq!(IndexId::of_dir(dir.path()).unwrap(), first);
    // Nothing temporary is left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(ID_FILE))
        .collect();
    assert_eq!(names, [ID_FILE]);
}

#[test]
fn each_directory_has_its_own_id_and_a_damaged_file_is_replaced() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let id_a = IndexId::of_dir(a.path()).unwrap();
    assert_ne!(id_a, IndexId::of_dir(b.path()).unwrap());
    std::fs::write(a.path().join(ID_FILE), "not an id").unwrap();
    let replaced = IndexId::of_dir(a.path()).unwrap();
    assert_eq!(IndexId::of_dir(a.path()).unwrap(), replaced);
}

#[test]
fn ids_read_back_as_written_and_fit_index_state_names() {
    let id = IndexId::random();
    let text = id.to_string();
    assert_eq!(text.len(), 16);
    assert_eq!(text.parse::<IndexId>(), Ok(id));
    assert_eq!(IndexId(0xab).to_string(), "00000000000000ab");
    // `index_state.name` holds 32 characters; the longest name made from an id.
    assert!(format!("tombstones:{id}").len() <= 32);
    for bad in ["", "0123", "0123456789abcdeg", "+123456789abcdef", "0123456789abcdef0"] {
        assert!(bad.parse::<IndexId>().is_err(), "{bad}");
    }
}
