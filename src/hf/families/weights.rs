//! A family's weights as the decoder asks for them: each [`Part`] located by the family's
//! [`Naming`], read from the safetensors files, transposed from a `Conv1D`'s `[in, out]`, cut
//! out of a fused projection, cut to the tokenizer's vocabulary, and Gemma's γ − 1 made γ.

use super::{Naming, TensorRef};
use crate::hf::HfError;
use crate::hf::weights::WeightFiles;
use crate::model::{Layout, Part, transpose};

/// The weight files of a folder read through a family's naming.
pub(crate) struct FamilyWeights<'a> {
    files: &'a mut WeightFiles,
    naming: &'a dyn Naming,
    vocab_tensors: Vec<String>,
    /// The first error met, with its file (the decoder only carries a message).
    error: Option<HfError>,
}

impl<'a> FamilyWeights<'a> {
    /// Reads `files` through `naming`.
    pub fn new(files: &'a mut WeightFiles, naming: &'a dyn Naming) -> FamilyWeights<'a> {
        FamilyWeights {
            vocab_tensors: naming.vocab_tensors(),
            files,
            naming,
            error: None,
        }
    }

    /// The first error met while the decoder read its weights.
    pub fn take_error(&mut self) -> Option<HfError> {
        self.error.take()
    }

    fn read(&mut self, r: &TensorRef, shape: &[usize]) -> Result<Vec<f32>, HfError> {
        let (stored, mut data) = self.files.take(&r.name)?;
        let vocab = self.vocab_tensors.contains(&r.name);
        let rows_ok =
            vocab && stored.len() == 2 && stored[1] == r.stored[1] && stored[0] >= r.stored[0];
        if stored != r.stored && !rows_ok {
            return Err(self.files.error_at(
                &r.name,
                format!(
                    "tensor `{}` has shape {stored:?}, but config.json implies {:?}",
                    r.name, r.stored
                ),
            ));
        }
        let mut dims = stored.clone();
        if r.transposed && dims.len() == 2 {
            data = transpose(&data, dims[0], dims[1]);
            dims.swap(0, 1);
        }
        if let Some(ranges) = &r.rows {
            let width: usize = dims[1..].iter().product();
            data = ranges
                .iter()
                .flat_map(|&(first, n)| data[first * width..(first + n) * width].iter().copied())
                .collect();
        }
        let want: usize = shape.iter().product();
        if vocab && data.len() > want {
            data.truncate(want);
        }
        if r.plus_one {
            data.iter_mut().for_each(|v| *v += 1.0);
        }
        if data.len() != want {
            return Err(self.files.error_at(
                &r.name,
                format!(
                    "tensor `{}` gives {} values where {shape:?} needs {want}",
                    r.name,
                    data.len()
                ),
            ));
        }
        Ok(data)
    }
}

impl Layout for FamilyWeights<'_> {
    fn fetch(&mut self, part: Part, shape: &[usize]) -> Result<Vec<f32>, String> {
        let r = self.naming.locate(part, shape);
        self.read(&r, shape).map_err(|e| {
            let message = e.to_string();
            self.error.get_or_insert(e);
            message
        })
    }
}
