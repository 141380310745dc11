//! The vault's cryptography (SECURITY.md §1): a master key wraps one random data key per owner,
//! and secrets are encrypted under their owner's data key. AES-256-GCM throughout, random 96-bit
//! nonces, and associated data that binds every ciphertext to its owner, row and purpose, so a
//! ciphertext copied to another row or another user fails to decrypt.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use hmac::Mac;
use uuid::Uuid;
use zeroize::{Zeroize, Zeroizing};

/// Format version of a secret blob; anything else is refused, never read as plaintext.
pub const SECRET_VERSION: u8 = 1;

/// Length of a nonce.
const NONCE_LEN: usize = 12;

/// Encryptions allowed under one key before it must be rotated (random nonces stay far from a
/// collision well below this).
pub const NONCE_BUDGET: u64 = 1 << 31;

/// What can go wrong; none of these carries key material or plaintext.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    /// The blob's version byte is not one this build reads.
    #[error("unknown vault format version {0}")]
    UnknownVersion(u8),
    /// The blob is too short or malformed.
    #[error("malformed vault data")]
    Malformed,
    /// Authentication failed: wrong key, tampered data or data moved to another row.
    #[error("vault data failed authentication")]
    Decrypt,
    /// The key has encrypted as much as it may; rotate it.
    #[error("the key's nonce budget is spent: rotate it")]
    NonceBudget,
    /// Key material of the wrong size.
    #[error("a vault key must be 32 bytes")]
    KeySize,
}

/// A 256-bit key, wiped from memory when dropped; never printed.
#[derive(Clone)]
pub struct Key(Zeroizing<[u8; 32]>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(****)")
    }
}

impl Key {
    /// A fresh random key.
    pub fn generate() -> Key {
        let mut bytes = [0u8; 32];
        rand::fill(&mut bytes);
        let key = Key(Zeroizing::new(bytes));
        bytes.zeroize();
        key
    }

    /// A key from exactly 32 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Key, CryptoError> {
        let array: [u8; 32] = bytes.try_into().map_err(|_| CryptoError::KeySize)?;
        Ok(Key(Zeroizing::new(array)))
    }

    /// The raw bytes, for wrapping under another key.
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The master key's public id: `hex(HMAC-SHA256(key, "arbor/kek-id/v1")[..8])`.
    pub fn key_id(&self) -> String {
        let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(self.bytes()) else {
            return String::new();
        };
        mac.update(b"arbor/kek-id/v1");
        mac.finalize().into_bytes()[..8].iter().map(|b| format!("{b:02x}")).collect()
    }

    fn cipher(&self) -> Aes256Gcm {
        // A 32-byte key always fits AES-256.
        Aes256Gcm::new(self.bytes().into())
    }
}

/// Canonical associated data: a label, then each field length-prefixed, so no two different
/// field lists encode the same bytes.
pub fn aad(label: &str, fields: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(label.len() + fields.iter().map(|f| f.len() + 4).sum::<usize>());
    out.extend_from_slice(label.as_bytes());
    for f in fields {
        out.extend_from_slice(&u32::try_from(f.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(f);
    }
    out
}

/// A fresh random 96-bit nonce from the operating system's generator.
fn fresh_nonce() -> [u8; NONCE_LEN] {
    let mut nonce = [0u8; NONCE_LEN];
    rand::fill(&mut nonce);
    nonce
}

fn seal(key: &Key, aad: &[u8], plaintext: &[u8]) -> (Vec<u8>, [u8; NONCE_LEN]) {
    let nonce = fresh_nonce();
    // AES-GCM encryption only fails for inputs of more than 64 GiB.
    let sealed =
        key.cipher().encrypt(&Nonce::from(nonce), Payload { msg: plaintext, aad }).unwrap_or_default();
    (sealed, nonce)
}

fn open(key: &Key, aad: &[u8], nonce: &[u8], sealed: &[u8]) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
    let nonce: [u8; NONCE_LEN] = nonce.try_into().map_err(|_| CryptoError::Malformed)?;
    key.cipher()
        .decrypt(&Nonce::from(nonce), Payload { msg: sealed, aad })
        .map(Zeroizing::new)
        .map_err(|_| CryptoError::Decrypt)
}

/// The known plaintext kept encrypted under the master key, to tell a wrong key at start-up.
const CANARY: &[u8] = b"arbor vault canary v1";

/// The canary, encrypted under the master key: `nonce ‖ ciphertext‖tag`.
pub fn canary(master: &Key) -> Vec<u8> {
    let (sealed, nonce) = seal(master, &aad("arbor/canary/v1", &[]), CANARY);
    [nonce.as_slice(), &sealed].concat()
}

/// Whether the stored canary decrypts to the known plaintext under this master key.
pub fn canary_matches(master: &Key, stored: &[u8]) -> bool {
    if stored.len() < NONCE_LEN {
        return false;
    }
    let (nonce, sealed) = stored.split_at(NONCE_LEN);
    open(master, &aad("arbor/canary/v1", &[]), nonce, sealed).is_ok_and(|p| p.as_slice() == CANARY)
}

fn dek_aad(owner: Uuid, dek_version: u32, kek_id: &str) -> Vec<u8> {
    aad("arbor/dek/v1", &[owner.as_bytes(), &dek_version.to_be_bytes(), kek_id.as_bytes()])
}

/// A data key wrapped under the master key, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrappedKey {
    /// The master key's id.
    pub kek_id: String,
    /// Random nonce.
    pub nonce: Vec<u8>,
    /// The data key, encrypted with its tag.
    pub wrapped: Vec<u8>,
}

/// Wraps an owner's data key under the master key, bound to owner, version and master key id.
pub fn wrap_key(master: &Key, owner: Uuid, dek_version: u32, dek: &Key) -> WrappedKey {
    let kek_id = master.key_id();
    let (wrapped, nonce) = seal(master, &dek_aad(owner, dek_version, &kek_id), dek.bytes());
    WrappedKey { kek_id, nonce: nonce.to_vec(), wrapped }
}

/// Unwraps a data key stored for this owner and version.
pub fn unwrap_key(master: &Key, owner: Uuid, dek_version: u32, w: &WrappedKey) -> Result<Key, CryptoError> {
    let plain = open(master, &dek_aad(owner, dek_version, &w.kek_id), &w.nonce, &w.wrapped)?;
    Key::from_bytes(&plain)
}

/// Where a secret belongs; all of it is bound into the ciphertext.
#[derive(Debug, Clone, Copy)]
pub struct SecretPlace<'a> {
    /// Owner (the organisation's own id for shared keys).
    pub owner: Uuid,
    /// The secret's row id.
    pub secret_id: Uuid,
    /// Provider (or purpose) it is for.
    pub provider: &'a str,
    /// Version of the owner's data key that encrypts it.
    pub dek_version: u32,
}

fn secret_aad(p: &SecretPlace<'_>) -> Vec<u8> {
    aad(
        "arbor/secret/v1",
        &[p.owner.as_bytes(), p.secret_id.as_bytes(), p.provider.as_bytes(), &p.dek_version.to_be_bytes()],
    )
}

/// Encrypts a secret: `version ‖ dek_version (4 bytes) ‖ nonce ‖ ciphertext‖tag`.
pub fn encrypt_secret(dek: &Key, place: &SecretPlace<'_>, plaintext: &[u8]) -> Vec<u8> {
    let (sealed, nonce) = seal(dek, &secret_aad(place), plaintext);
    let mut out = Vec::with_capacity(1 + 4 + NONCE_LEN + sealed.len());
    out.push(SECRET_VERSION);
    out.extend_from_slice(&place.dek_version.to_be_bytes());
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);
    out
}

/// Decrypts a secret stored at `place`; any mismatch of key, place or bytes is an error.
pub fn decrypt_secret(
    dek: &Key,
    place: &SecretPlace<'_>,
    blob: &[u8],
) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
    let (&version, rest) = blob.split_first().ok_or(CryptoError::Malformed)?;
    if version != SECRET_VERSION {
        return Err(CryptoError::UnknownVersion(version));
    }
    if rest.len() < 4 + NONCE_LEN + 16 {
        return Err(CryptoError::Malformed);
    }
    let (dek_version, rest) = rest.split_at(4);
    if dek_version != place.dek_version.to_be_bytes() {
        return Err(CryptoError::Decrypt);
    }
    let (nonce, sealed) = rest.split_at(NONCE_LEN);
    open(dek, &secret_aad(place), nonce, sealed)
}

/// Counts encryptions under one key and refuses past [`NONCE_BUDGET`].
pub fn spend_nonce(used: u64) -> Result<u64, CryptoError> {
    if used >= NONCE_BUDGET {
        return Err(CryptoError::NonceBudget);
    }
    Ok(used + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(owner: Uuid, secret: Uuid) -> SecretPlace<'static> {
        SecretPlace { owner, secret_id: secret, provider: "openai", dek_version: 1 }
    }

    #[test]
    fn secrets_round_trip_under_a_wrapped_data_key() {
        let master = Key::generate();
        let owner = Uuid::now_v7();
        let dek = Key::generate();
        let wrapped = wrap_key(&master, owner, 1, &dek);
        assert_eq!(wrapped.kek_id, master.key_id());
        assert_eq!(wrapped.kek_id.len(), 16);
        let dek = unwrap_key(&master, owner, 1, &wrapped).unwrap();
        let secret = Uuid::now_v7();
        let blob = encrypt_secret(&dek, &place(owner, secret), b"sk-live-123456");
        assert_eq!(blob[0], SECRET_VERSION);
        assert!(!blob.windows(14).any(|w| w == b"sk-live-123456"));
        let back = decrypt_secret(&dek, &place(owner, secret), &blob).unwrap();
        assert_eq!(back.as_slice(), b"sk-live-123456");
        // Two encryptions of one value differ (fresh nonces).
        assert_ne!(blob, encrypt_secret(&dek, &place(owner, secret), b"sk-live-123456"));
    }

    #[test]
    fn any_flipped_bit_is_a_typed_error() {
        let dek = Key::generate();
        let (owner, secret) = (Uuid::now_v7(), Uuid::now_v7());
        let blob = encrypt_secret(&dek, &place(owner, secret), b"value");
        for i in 0..blob.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = blob.clone();
                bad[i] ^= bit;
                let err = decrypt_secret(&dek, &place(owner, secret), &bad).unwrap_err();
                if i == 0 {
                    assert!(matches!(err, CryptoError::UnknownVersion(_)), "byte {i}: {err:?}");
                } else {
                    assert_eq!(err, CryptoError::Decrypt, "byte {i}");
                }
            }
        }
        assert_eq!(decrypt_secret(&dek, &place(owner, secret), &blob[..10]), Err(CryptoError::Malformed));
        assert_eq!(decrypt_secret(&dek, &place(owner, secret), &[]), Err(CryptoError::Malformed));
    }

    #[test]
    fn a_ciphertext_moved_to_another_row_owner_or_provider_fails() {
        let dek = Key::generate();
        let (owner, secret) = (Uuid::now_v7(), Uuid::now_v7());
        let blob = encrypt_secret(&dek, &place(owner, secret), b"value");
        assert!(decrypt_secret(&dek, &place(owner, Uuid::now_v7()), &blob).is_err(), "another row");
        assert!(decrypt_secret(&dek, &place(Uuid::now_v7(), secret), &blob).is_err(), "another owner");
        let other_provider = SecretPlace { provider: "anthropic", ..place(owner, secret) };
        assert!(decrypt_secret(&dek, &other_provider, &blob).is_err(), "another provider");
        let other_version = SecretPlace { dek_version: 2, ..place(owner, secret) };
        assert!(decrypt_secret(&dek, &other_version, &blob).is_err(), "another key version");
        assert!(decrypt_secret(&Key::generate(), &place(owner, secret), &blob).is_err(), "another key");
        // A wrapped data key moved to another owner does not unwrap either.
        let master = Key::generate();
        let wrapped = wrap_key(&master, owner, 1, &dek);
        assert!(unwrap_key(&master, Uuid::now_v7(), 1, &wrapped).is_err());
        assert!(unwrap_key(&master, owner, 2, &wrapped).is_err());
        assert!(unwrap_key(&Key::generate(), owner, 1, &wrapped).is_err());
    }

    #[test]
    fn the_canary_tells_the_right_master_key() {
        let master = Key::generate();
        let stored = canary(&master);
        assert!(canary_matches(&master, &stored));
        assert!(!canary_matches(&Key::generate(), &stored));
        assert!(!canary_matches(&master, &stored[..5]));
        assert_ne!(master.key_id(), Key::generate().key_id());
        assert_eq!(format!("{master:?}"), "Key(****)");
    }

    #[test]
    fn a_million_nonces_never_repeat() {
        let mut seen = std::collections::HashSet::with_capacity(1_000_000);
        for _ in 0..1_000_000 {
            assert!(seen.insert(fresh_nonce()), "a nonce repeated");
        }
    }

    #[test]
    fn associated_data_is_unambiguous_and_the_nonce_budget_holds() {
        assert_ne!(aad("l", &[b"ab", b"c"]), aad("l", &[b"a", b"bc"]));
        assert_eq!(spend_nonce(0), Ok(1));
        assert_eq!(spend_nonce(NONCE_BUDGET), Err(CryptoError::NonceBudget));
        assert_eq!(Key::from_bytes(&[0u8; 31]).unwrap_err(), CryptoError::KeySize);
    }
}
