//! What every consumer of a teacher needs of a model, whichever it is: pdsweep's own
//! [`Transformer`] (trained teachers, plain-LLaMA released ones) or a released [`Decoder`] of
//! another family. Logit passes, online teachers, held-out scoring and the agreement measure
//! take `&dyn LanguageModel`.

use burn::tensor::{Device, FloatDType, Int, Tensor};

use super::decoder::Decoder;
use super::transformer::{Transformer, TransformerConfig};
use crate::kernels;
use crate::spec::TeacherPrecision;

/// A causal language model seen from its head (see the module doc).
pub trait LanguageModel {
    /// The final hidden state (after the last norm) in `compute`.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, seq]`; returns `[batch, seq, d_model]`
    fn hidden_in(&self, tokens: Tensor<2, Int>, compute: FloatDType) -> Tensor<3>;

    /// The output head in `compute` (with its soft-cap, if any).
    fn head_weight(&self, compute: FloatDType) -> kernels::HeadWeight;

    /// Rows of the token embedding.
    fn vocab(&self) -> usize;

    /// Longest sequence the model's position tables cover.
    fn context(&self) -> usize;

    /// Next-token logits in f32.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, seq]`; returns `[batch, seq, vocab]`
    fn logits(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        let [b, s] = tokens.dims();
        let h = self.hidden_in(tokens, FloatDType::F32);
        let d = h.dims()[2];
        let z = kernels::head_logits(h.reshape([b * s, d]), &self.head_weight(FloatDType::F32));
        let v = z.dims()[1];
        z.reshape([b, s, v])
    }
}

impl LanguageModel for Transformer {
    fn hidden_in(&self, tokens: Tensor<2, Int>, compute: FloatDType) -> Tensor<3> {
        Transformer::hidden_in(self, tokens, compute)
    }

    fn head_weight(&self, compute: FloatDType) -> kernels::HeadWeight {
        Transformer::head_weight(self, compute)
    }

    fn vocab(&self) -> usize {
        Transformer::vocab(self)
    }

    fn context(&self) -> usize {
        Transformer::context(self)
    }

    fn logits(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        self.forward(tokens)
    }
}

impl LanguageModel for Decoder {
    fn hidden_in(&self, tokens: Tensor<2, Int>, compute: FloatDType) -> Tensor<3> {
        Decoder::hidden_in(self, tokens, compute)
    }

    fn head_weight(&self, compute: FloatDType) -> kernels::HeadWeight {
        Decoder::head_weight(self, compute)
    }

    fn vocab(&self) -> usize {
        Decoder::vocab(self)
    }

    fn context(&self) -> usize {
        Decoder::context(self)
    }
}

/// A teacher as loaded: pdsweep's own transformer, or a released decoder of another family,
/// and the token it was trained to see first (see [`TeacherModel::with_bos`]).
#[derive(Debug, Clone)]
pub struct TeacherModel {
    net: Net,
    bos: Option<u32>,
    /// The dtype of its activations whatever a caller asks for (set for a teacher run in
    /// bf16, see [`TeacherModel::in_precision`]).
    activations: Option<FloatDType>,
}

/// Boxed: both models are large, and only one is built per teacher.
#[derive(Debug, Clone)]
enum Net {
    Own(Box<Transformer>, TransformerConfig),
    Released(Box<Decoder>),
}

impl TeacherModel {
    /// pdsweep's LLaMA of `config` (trained here, or a released plain LLaMA).
    pub fn own(model: Transformer, config: TransformerConfig) -> TeacherModel {
        TeacherModel {
            net: Net::Own(Box::new(model), config),
            bos: None,
            activations: None,
        }
    }

    /// A released model of another architecture.
    pub fn released(model: Decoder) -> TeacherModel {
        TeacherModel {
            net: Net::Released(Box::new(model)),
            bos: None,
            activations: None,
        }
    }

    /// The same teacher running in `precision`.
    ///
    /// For bf16 its matrices are stored in bf16 (a transformer of pdsweep's becomes the equivalent
    /// [`Decoder`]) and its activations are `activations`: f32 on the CPU, whose kernels round them
    /// to bf16 at every product, bf16 on a GPU. `Err` names what could not be converted.
    pub fn in_precision(
        self,
        precision: TeacherPrecision,
        activations: FloatDType,
        device: &Device,
    ) -> Result<TeacherModel, String> {
        if precision.is_f32() {
            return Ok(self);
        }
        let decoder = match self.net {
            Net::Own(t, config) => Decoder::from_transformer(&t, &config, device)?,
            Net::Released(d) => *d,
        };
        Ok(TeacherModel {
            net: Net::Released(Box::new(decoder.with_bf16_weights())),
            bos: self.bos,
            activations: Some(activations),
        })
    }

    /// The same model seeing `bos` before every window: a model released with a tokenizer that puts
    /// BOS before each text (Gemma, Llama 3) was trained so, and scores a window without it far
    /// worse (Gemma-3-270M: about 1.5 nats/token).
    ///
    /// The windows are unchanged: position i still predicts token i + 1 from tokens 0..=i, now with
    /// BOS in front, so logits line up with a student's. Needs one position more than the windows
    /// ([`LanguageModel::context`] says how many remain).
    pub fn with_bos(mut self, bos: Option<u32>) -> TeacherModel {
        self.bos = bos;
        self
    }

    /// The token it sees first, if any.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// The model as pdsweep's own transformer (what sampling and decoding need), or `None`
    /// for a released decoder.
    pub fn into_transformer(self) -> Option<Transformer> {
        match self.net {
            Net::Own(t, _) => Some(*t),
            Net::Released(_) => None,
        }
    }

    fn inner(&self) -> &dyn LanguageModel {
        match &self.net {
            Net::Own(t, _) => t.as_ref(),
            Net::Released(d) => d.as_ref(),
        }
    }
}

impl LanguageModel for TeacherModel {
    fn hidden_in(&self, tokens: Tensor<2, Int>, compute: FloatDType) -> Tensor<3> {
        let compute = self.activations.unwrap_or(compute);
        let Some(bos) = self.bos else {
            return self.inner().hidden_in(tokens, compute);
        };
        let [b, s] = tokens.dims();
        let first = Tensor::<2, Int>::full([b, 1], i64::from(bos), &tokens.device());
        let hidden = self
            .inner()
            .hidden_in(Tensor::cat(vec![first, tokens], 1), compute);
        hidden.narrow(1, 1, s)
    }

    fn head_weight(&self, compute: FloatDType) -> kernels::HeadWeight {
        self.inner()
            .head_weight(self.activations.unwrap_or(compute))
    }

    fn vocab(&self) -> usize {
        self.inner().vocab()
    }

    fn context(&self) -> usize {
        self.inner().context() - usize::from(self.bos.is_some())
    }
}

impl<T: LanguageModel + ?Sized> LanguageModel for &T {
    fn hidden_in(&self, tokens: Tensor<2, Int>, compute: FloatDType) -> Tensor<3> {
        (**self).hidden_in(tokens, compute)
    }

    fn head_weight(&self, compute: FloatDType) -> kernels::HeadWeight {
        (**self).head_weight(compute)
    }

    fn vocab(&self) -> usize {
        (**self).vocab()
    }

    fn context(&self) -> usize {
        (**self).context()
    }

    fn logits(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        (**self).logits(tokens)
    }
}
