//! A file being received: its bytes go to a temp file as they arrive, hashed on the way, so no
//! upload is ever held whole in memory. The caller decides between chunks whether to go on (size
//! limits, quota), and at the end whether to keep the file as it is or read it back (an image to
//! resize). Dropping either stage removes the temp file.

use std::fs::File;

use sha2::{Digest, Sha512_256};
use tokio::io::AsyncWriteExt;

use super::{BlobError, BlobStore, Kind, StoredBlob, TempPath, blocking, hex, sniff};

/// Bytes being written to a temp file.
pub struct Staging {
    store: BlobStore,
    temp: TempPath,
    file: tokio::fs::File,
    hasher: Sha512_256,
    /// One byte more than sniffing reads, so `Kind::sniff` knows the head was cut.
    head: Vec<u8>,
    size: u64,
}

/// A temp file written whole, hashed and sniffed, not yet in the store.
pub struct Staged {
    store: BlobStore,
    temp: TempPath,
    file: File,
    hash: String,
    size: u64,
    kind: Kind,
}

impl BlobStore {
    /// Starts receiving a file.
    pub async fn stage(&self) -> Result<Staging, BlobError> {
        let tmp = self.dirs.tmp.clone();
        let (temp, file) = blocking(move || Ok(TempPath::create(&tmp)?)).await?;
        Ok(Staging {
            store: self.clone(),
            temp,
            file: tokio::fs::File::from_std(file),
            hasher: Sha512_256::new(),
            head: Vec::new(),
            size: 0,
        })
    }
}

impl Staging {
    /// Bytes written so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Appends a chunk.
    pub async fn write(&mut self, chunk: &[u8]) -> Result<(), BlobError> {
        self.size = self.size.saturating_add(chunk.len() as u64);
        self.hasher.update(chunk);
        let wanted = (sniff::SNIFF_LEN + 1).saturating_sub(self.head.len()).min(chunk.len());
        self.head.extend_from_slice(&chunk[..wanted]);
        self.file.write_all(chunk).await?;
        Ok(())
    }

    /// The file is whole: flushed, hashed and sniffed.
    pub async fn finish(mut self) -> Result<Staged, BlobError> {
        self.file.flush().await?;
        let file = self.file.into_std().await;
        Ok(Staged {
            store: self.store,
            temp: self.temp,
            file,
            hash: hex(&self.hasher.finalize()),
            size: self.size,
            kind: Kind::sniff(&self.head),
        })
    }
}

impl Staged {
    /// What the bytes are, by their magic bytes.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The SHA-512/256 of the bytes, lowercase hex.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// Moves the file into the store as it is.
    pub async fn commit(self) -> Result<StoredBlob, BlobError> {
        let Staged { store, temp, file, hash, size, kind } = self;
        blocking(move || {
            let created = store.commit(&temp, file, &hash, size)?;
            Ok(StoredBlob { hash, size, kind, created })
        })
        .await
    }

    /// Reads the file back and drops it (for work that needs the bytes whole, such as decoding
    /// an image; the caller has capped the size).
    pub async fn into_bytes(self) -> Result<Vec<u8>, BlobError> {
        let bytes = tokio::fs::read(&self.temp.0).await?;
        Ok(bytes)
    }
}
