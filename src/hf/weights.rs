//! Safetensors weights of a Hugging Face folder: `model.safetensors`, or the shards that
//! `model.safetensors.index.json` lists, memory-mapped and read tensor by tensor (F32, F16 and
//! BF16 become f32); their content hash; and `model.safetensors` (f32) for exported models.
//! The format is read with the `safetensors` crate, which validates headers and offsets.

use crate::error::Cause;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use memmap2::Mmap;
use safetensors::tensor::{Dtype, Metadata, SafeTensors, TensorView};
use sha2::{Digest, Sha256};

use super::error::HfError;
use crate::model::{NamedTensor, WeightSource};

/// The single-file weights.
pub(crate) const SINGLE: &str = "model.safetensors";
/// The index of sharded weights.
pub(crate) const INDEX: &str = "model.safetensors.index.json";

/// Buffers the rotary embeddings of old checkpoints carry; recomputed from θ, never read.
const IGNORED_SUFFIX: &str = "rotary_emb.inv_freq";

/// One memory-mapped weight file with its parsed header.
struct File {
    path: PathBuf,
    map: Mmap,
    header_len: usize,
    metadata: Metadata,
}

/// The weight files of a folder, read tensor by tensor.
pub(crate) struct WeightFiles {
    dir: PathBuf,
    files: Vec<File>,
    /// Tensor name → file.
    index: BTreeMap<String, usize>,
    /// Tensors handed out so far.
    used: BTreeSet<String>,
    /// The first error met while the model read its tensors (with its file).
    error: Option<HfError>,
    /// Rows of the embedding and output head as stored, when the model reads fewer (a padded
    /// vocabulary cut to its tokenizer's: see [`WeightFiles::cut_vocabulary`]).
    stored_vocab: Option<usize>,
}

/// The tensors with one row per token.
const VOCAB_TENSORS: [&str; 2] = ["model.embed_tokens.weight", "lm_head.weight"];

/// The weight files of `dir` in name order: `model.safetensors`, or the shards of the index.
pub(crate) fn weight_file_paths(dir: &Path) -> Result<Vec<PathBuf>, HfError> {
    let single = dir.join(SINGLE);
    if single.is_file() {
        return Ok(vec![single]);
    }
    let index = dir.join(INDEX);
    if !index.is_file() {
        let hint = if dir.join("pytorch_model.bin").is_file() {
            " (it has `pytorch_model.bin`: convert it to safetensors, e.g. load it with transformers and `save_pretrained(dir, safe_serialization=True)`)"
        } else {
            ""
        };
        return Err(HfError::Weights {
            path: dir.to_path_buf(),
            source: format!("no `{SINGLE}` and no `{INDEX}`{hint}").into(),
        });
    }
    let map = shard_map(&index)?;
    let names: BTreeSet<&String> = map.values().collect();
    Ok(names.into_iter().map(|n| dir.join(n)).collect())
}

/// The `weight_map` of an index: tensor name → shard file name.
fn shard_map(index: &Path) -> Result<BTreeMap<String, String>, HfError> {
    let bad = |reason: Cause| HfError::Weights {
        path: index.to_path_buf(),
        source: reason,
    };
    let text = std::fs::read_to_string(index).map_err(|e| HfError::Read {
        path: index.to_path_buf(),
        source: e.into(),
    })?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(crate::error::context("not valid JSON", e)))?;
    let map = value["weight_map"]
        .as_object()
        .ok_or_else(|| bad("no `weight_map` table".into()))?;
    map.iter()
        .map(|(k, v)| match v.as_str() {
            Some(f) if !f.contains('/') && !f.contains('\\') && f.ends_with(".safetensors") => {
                Ok((k.clone(), f.to_string()))
            }
            _ => Err(bad(format!(
                "`weight_map` entry `{k}` names `{v}`, not a .safetensors file of this folder"
            )
            .into())),
        })
        .collect()
}

fn open_file(path: &Path) -> Result<File, HfError> {
    let file = std::fs::File::open(path).map_err(|e| HfError::Read {
        path: path.to_path_buf(),
        source: e.into(),
    })?;
    // SAFETY: weight files are read-only inputs; a file changed while mapped is the user's
    // doing and at worst gives wrong values, which the content hash of the plan records.
    let map = unsafe { Mmap::map(&file) }.map_err(|e| HfError::Read {
        path: path.to_path_buf(),
        source: e.into(),
    })?;
    let (header_len, metadata) =
        SafeTensors::read_metadata(&map).map_err(|e| HfError::Weights {
            path: path.to_path_buf(),
            source: crate::error::context("not a valid safetensors file", e),
        })?;
    SafeTensors::deserialize(&map).map_err(|e| HfError::Weights {
        path: path.to_path_buf(),
        source: crate::error::context("not a valid safetensors file", e),
    })?;
    Ok(File {
        path: path.to_path_buf(),
        map,
        header_len,
        metadata,
    })
}

impl WeightFiles {
    /// Opens the weights of the folder `dir`.
    pub fn open(dir: &Path) -> Result<WeightFiles, HfError> {
        let paths = weight_file_paths(dir)?;
        let files: Vec<File> = paths
            .iter()
            .map(|p| open_file(p))
            .collect::<Result<_, _>>()?;
        let mut index = BTreeMap::new();
        for (i, f) in files.iter().enumerate() {
            for name in f.metadata.tensors().keys() {
                if let Some(j) = index.insert(name.clone(), i) {
                    return Err(HfError::Weights {
                        path: f.path.clone(),
                        source: format!("tensor `{name}` is also in `{}`", files[j].path.display())
                            .into(),
                    });
                }
            }
        }
        if paths.len() > 1 || !dir.join(SINGLE).is_file() {
            let listed = shard_map(&dir.join(INDEX))?;
            for (name, file) in &listed {
                let found = index.get(name).map(|&i| &files[i].path);
                if found.is_none_or(|p| !p.ends_with(file)) {
                    return Err(HfError::Weights {
                        path: dir.join(file),
                        source: format!("the index lists tensor `{name}` here, but it is not")
                            .into(),
                    });
                }
            }
        }
        Ok(WeightFiles {
            dir: dir.to_path_buf(),
            files,
            index,
            used: BTreeSet::new(),
            error: None,
            stored_vocab: None,
        })
    }

    /// Every tensor name with its file.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.index.keys().map(String::as_str)
    }

    /// The values of tensor `name` as f32, with its shape.
    fn read(&self, name: &str) -> Result<(Vec<usize>, Vec<f32>), HfError> {
        let Some(&i) = self.index.get(name) else {
            return Err(HfError::Weights {
                path: self.dir.clone(),
                source: format!("tensor `{name}` is missing").into(),
            });
        };
        let f = &self.files[i];
        let info = f.metadata.info(name).ok_or_else(|| HfError::Weights {
            path: f.path.clone(),
            source: format!("tensor `{name}` is missing").into(),
        })?;
        let start = 8 + f.header_len + info.data_offsets.0;
        let end = 8 + f.header_len + info.data_offsets.1;
        let bytes = &f.map[start..end];
        let data = to_f32(info.dtype, bytes).ok_or_else(|| HfError::Weights {
            path: f.path.clone(),
            source: format!(
                "tensor `{name}` is stored as `{:?}`; pdsweep reads F32, F16 and BF16",
                info.dtype
            )
            .into(),
        })?;
        Ok((info.shape.clone(), data))
    }

    /// The embedding and output head are stored with `stored` rows (config.json's
    /// `vocab_size`), of which the model keeps the first: released models often pad their
    /// vocabulary past the tokenizer's last id (Qwen 2.5: 151,936 rows for 151,665 tokens), and
    /// rows no token id reaches are cut, so the logits cover the tokenizer's range.
    pub fn cut_vocabulary(&mut self, stored: usize) {
        self.stored_vocab = Some(stored);
    }

    /// After the model took its tensors: refuses any tensor left over (a bias, another
    /// layer), and for a tied model checks that a stored `lm_head.weight` is the embedding.
    pub fn finish(&mut self, tied: bool) -> Result<(), HfError> {
        self.finish_with(
            tied,
            ("lm_head.weight", "model.embed_tokens.weight"),
            &|n| n.ends_with(IGNORED_SUFFIX),
            "the LLaMA model config.json describes (pdsweep's has no biases and no other layers)",
        )
    }

    /// [`WeightFiles::finish`] for any family: its `(head, embedding)` names, the stored
    /// buffers it ignores, and what the model is (for the message).
    pub fn finish_with(
        &mut self,
        tied: bool,
        (head_name, embed_name): (&str, &str),
        is_buffer: &dyn Fn(&str) -> bool,
        model: &str,
    ) -> Result<(), HfError> {
        if tied && self.index.contains_key(head_name) {
            let (_, head) = self.read(head_name)?;
            let (_, embed) = self.read(embed_name)?;
            if head != embed {
                return Err(HfError::Weights {
                    path: self.file_of(head_name),
                    source: format!(
                        "config.json ties the output head to the embedding (`tie_word_embeddings`), but tensor `{head_name}` differs from `{embed_name}`"
                    ).into(),
                });
            }
            self.used.insert(head_name.into());
        }
        let extra = self
            .index
            .keys()
            .find(|n| !self.used.contains(*n) && !is_buffer(n));
        match extra {
            Some(name) => Err(HfError::Weights {
                path: self.file_of(name),
                source: format!("tensor `{name}` is not part of {model}").into(),
            }),
            None => Ok(()),
        }
    }

    /// The values of tensor `name` as f32 with its stored shape, marked as used.
    pub(crate) fn take(&mut self, name: &str) -> Result<(Vec<usize>, Vec<f32>), HfError> {
        let found = self.read(name)?;
        self.used.insert(name.to_string());
        Ok(found)
    }

    /// An error about tensor `name`, naming its file.
    pub(crate) fn error_at(&self, name: &str, reason: String) -> HfError {
        HfError::Weights {
            path: self.file_of(name),
            source: reason.into(),
        }
    }

    fn file_of(&self, name: &str) -> PathBuf {
        self.index
            .get(name)
            .map_or_else(|| self.dir.clone(), |&i| self.files[i].path.clone())
    }
}

impl WeightFiles {
    /// The first error met while a model read its tensors.
    pub fn take_error(&mut self) -> Option<HfError> {
        self.error.take()
    }

    fn checked(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, HfError> {
        let (found, mut data) = self.read(name)?;
        if let (Some(stored), [rows, width]) = (self.stored_vocab, shape)
            && VOCAB_TENSORS.contains(&name)
            && found == [stored, *width]
            && stored >= *rows
        {
            data.truncate(rows * width);
            return Ok(data);
        }
        if found != shape {
            return Err(HfError::Weights {
                path: self.file_of(name),
                source: format!(
                    "tensor `{name}` has shape {found:?}, but config.json implies {shape:?}"
                )
                .into(),
            });
        }
        Ok(data)
    }
}

impl WeightSource for WeightFiles {
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        match self.checked(name, shape) {
            Ok(data) => {
                self.used.insert(name.to_string());
                Ok(data)
            }
            Err(e) => {
                let message = crate::error::chain(&e);
                self.error.get_or_insert(e);
                Err(message)
            }
        }
    }
}

/// Little-endian `bytes` of `dtype` as f32 (`None` for types other than F32, F16, BF16).
fn to_f32(dtype: Dtype, bytes: &[u8]) -> Option<Vec<f32>> {
    let halves = || {
        bytes
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
    };
    match dtype {
        Dtype::F32 => Some(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        Dtype::BF16 => Some(
            halves()
                .map(|h| f32::from_bits(u32::from(h) << 16))
                .collect(),
        ),
        Dtype::F16 => Some(halves().map(|h| half::f16::from_bits(h).to_f32()).collect()),
        _ => None,
    }
}

/// File identity for the hash memo: path, length and modification time.
type FileStamp = (PathBuf, u64, Option<std::time::SystemTime>);

/// Hashes already computed by this process.
static HASHES: Mutex<Option<HashMap<Vec<FileStamp>, String>>> = Mutex::new(None);

/// SHA-256 (hex) over the weight files of `dir` in name order, each as its file name, its length
/// (u64, little-endian) and its bytes: the identity of a pre-trained model.
///
/// Computed once per process for unchanged files (about 1 s per GB here).
pub(crate) fn weights_sha256(dir: &Path) -> Result<String, HfError> {
    let paths = weight_file_paths(dir)?;
    let stamps: Vec<FileStamp> = paths
        .iter()
        .map(|p| {
            let meta = std::fs::metadata(p).map_err(|e| HfError::Read {
                path: p.clone(),
                source: e.into(),
            })?;
            let canonical = p.canonicalize().unwrap_or_else(|_| p.clone());
            Ok((canonical, meta.len(), meta.modified().ok()))
        })
        .collect::<Result<_, HfError>>()?;
    if let Some(hash) = HASHES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&stamps))
    {
        return Ok(hash.clone());
    }
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 4 << 20];
    for (path, (_, len, _)) in paths.iter().zip(&stamps) {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        hasher.update(name.unwrap_or_default().as_bytes());
        hasher.update(len.to_le_bytes());
        let read_error = |e: std::io::Error| HfError::Read {
            path: path.clone(),
            source: e.into(),
        };
        let mut file = std::fs::File::open(path).map_err(read_error)?;
        loop {
            let n = file.read(&mut buffer).map_err(read_error)?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
        }
    }
    let hash = crate::digest::hex(&hasher.finalize());
    HASHES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(stamps, hash.clone());
    Ok(hash)
}

/// Writes `tensors` (f32) as one safetensors file at `path`, through a temporary file.
pub fn write_safetensors(path: &Path, tensors: &[NamedTensor]) -> Result<(), HfError> {
    let fail = |reason: Cause| HfError::Write {
        path: path.to_path_buf(),
        source: reason,
    };
    let bytes: Vec<Vec<u8>> = tensors
        .iter()
        .map(|t| t.data.iter().flat_map(|v| v.to_le_bytes()).collect())
        .collect();
    let views: Vec<(&str, TensorView)> = tensors
        .iter()
        .zip(&bytes)
        .map(|(t, b)| {
            TensorView::new(Dtype::F32, t.shape.clone(), b)
                .map(|v| (t.name.as_str(), v))
                .map_err(|e| fail(crate::error::context(format!("tensor `{}`", t.name), e)))
        })
        .collect::<Result<_, _>>()?;
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    let serialized = safetensors::serialize(views, Some(metadata)).map_err(|e| fail(e.into()))?;
    crate::atomic::write_atomic(path, &[&serialized]).map_err(|e| fail(e.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(name: &str, shape: &[usize], start: f32) -> NamedTensor {
        let n: usize = shape.iter().product();
        NamedTensor {
            name: name.into(),
            shape: shape.to_vec(),
            data: (0..n).map(|i| start + i as f32 * 0.25).collect(),
        }
    }

    #[test]
    fn written_weights_read_back_and_leftovers_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let tensors = vec![
            tensor("model.embed_tokens.weight", &[4, 3], 0.0),
            tensor("model.norm.weight", &[3], 1.0),
            tensor("model.layers.0.self_attn.q_proj.bias", &[3], 2.0),
        ];
        write_safetensors(&dir.path().join(SINGLE), &tensors).unwrap();
        let mut files = WeightFiles::open(dir.path()).unwrap();
        assert_eq!(
            files.tensor("model.embed_tokens.weight", &[4, 3]).unwrap(),
            tensors[0].data
        );
        let wrong = files.tensor("model.norm.weight", &[4]).unwrap_err();
        assert!(
            wrong.contains("model.norm.weight") && wrong.contains("[3]"),
            "{wrong}"
        );
        files.tensor("model.norm.weight", &[3]).unwrap();
        let extra = crate::error::chain(&files.finish(true).unwrap_err());
        assert!(
            extra.contains("model.layers.0.self_attn.q_proj.bias"),
            "{extra}"
        );
        let h1 = weights_sha256(dir.path()).unwrap();
        assert_eq!(h1.len(), 64);
    }

    #[test]
    fn half_precision_becomes_f32() {
        let bf16: Vec<u8> = [1.5f32, -2.0, 0.15625]
            .iter()
            .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
            .collect();
        assert_eq!(to_f32(Dtype::BF16, &bf16), Some(vec![1.5, -2.0, 0.15625]));
        let f16: Vec<u8> = [1.5f32, -2.0, 0.15625]
            .iter()
            .flat_map(|v| half::f16::from_f32(*v).to_bits().to_le_bytes())
            .collect();
        assert_eq!(to_f32(Dtype::F16, &f16), Some(vec![1.5, -2.0, 0.15625]));
        assert_eq!(to_f32(Dtype::I8, &[1, 2]), None);
    }

    #[test]
    fn a_folder_without_weights_says_what_it_lacks() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pytorch_model.bin"), b"x").unwrap();
        let err = crate::error::chain(&WeightFiles::open(dir.path()).err().unwrap());
        assert!(
            err.contains("model.safetensors") && err.contains("pytorch_model.bin"),
            "{err}"
        );
    }
}
