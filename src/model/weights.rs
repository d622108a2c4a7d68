//! The model's weights by name, in and out: every parameter under its Hugging Face LLaMA name
//! (`model.layers.0.self_attn.q_proj.weight`, ...) in PyTorch's layout (`[out, in]` for linear
//! layers, where burn keeps `[in, out]`), so a checkpoint of either side maps onto the other
//! without a renaming table. Files are the business of `crate::hf`; this module only knows the
//! names, shapes and layouts.

use burn::module::Param;
use burn::nn::{Embedding, Linear, RmsNorm};
use burn::tensor::{Device, Tensor, TensorData};

use super::transformer::{Attention, Block, Mlp, Transformer, TransformerConfig, rope_tables};

/// One parameter in PyTorch's layout.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedTensor {
    /// The Hugging Face name.
    pub name: String,
    /// Its shape (`[out, in]` for linear layers).
    pub shape: Vec<usize>,
    /// Row-major values.
    pub data: Vec<f32>,
}

/// Where [`TransformerConfig::from_weights`] gets its tensors: the values of the tensor `name`
/// in PyTorch's layout, which must have shape `shape` (the source says which file and why
/// when it cannot give them).
pub trait WeightSource {
    /// The row-major values of tensor `name` of shape `shape`.
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String>;
}

/// The names and shapes of every parameter of a model of `config`, in the order
/// [`Transformer::named_weights`] lists them (a tied head has no `lm_head.weight`).
#[cfg(test)]
pub(crate) fn weight_names(config: &TransformerConfig) -> Vec<(String, Vec<usize>)> {
    let s = &config.shape;
    let (d, ff, vocab) = (s.d_model as usize, s.d_ff as usize, s.vocab as usize);
    let head_dim = d / s.n_heads as usize;
    let (q, kv) = (
        s.n_heads as usize * head_dim,
        s.n_kv_heads as usize * head_dim,
    );
    let mut out = vec![("model.embed_tokens.weight".to_string(), vec![vocab, d])];
    for i in 0..s.n_layers as usize {
        let p = |rest: &str| format!("model.layers.{i}.{rest}");
        out.extend([
            (p("input_layernorm.weight"), vec![d]),
            (p("self_attn.q_proj.weight"), vec![q, d]),
            (p("self_attn.k_proj.weight"), vec![kv, d]),
            (p("self_attn.v_proj.weight"), vec![kv, d]),
            (p("self_attn.o_proj.weight"), vec![d, q]),
            (p("post_attention_layernorm.weight"), vec![d]),
            (p("mlp.gate_proj.weight"), vec![ff, d]),
            (p("mlp.up_proj.weight"), vec![ff, d]),
            (p("mlp.down_proj.weight"), vec![d, ff]),
        ]);
    }
    out.push(("model.norm.weight".to_string(), vec![d]));
    if !s.tie_embeddings {
        out.push(("lm_head.weight".to_string(), vec![vocab, d]));
    }
    out
}

/// `[rows, cols]` row-major → `[cols, rows]` row-major.
pub(crate) fn transpose(data: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; data.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = data[r * cols + c];
        }
    }
    out
}

/// Reads tensors in the order of [`Transformer::named_weights`], so a source can stream them.
struct Reader<'a> {
    source: &'a mut dyn WeightSource,
    device: &'a Device,
}

impl Reader<'_> {
    fn vector(&mut self, name: &str, len: usize) -> Result<Param<Tensor<1>>, String> {
        let data = self.source.tensor(name, &[len])?;
        Ok(Param::from_tensor(Tensor::from_data(
            TensorData::new(data, [len]),
            self.device,
        )))
    }

    /// A linear layer stored `[out, in]`, kept by burn as `[in, out]`.
    fn linear(&mut self, name: &str, d_out: usize, d_in: usize) -> Result<Linear, String> {
        let data = self.source.tensor(name, &[d_out, d_in])?;
        let weight = Tensor::from_data(
            TensorData::new(transpose(&data, d_out, d_in), [d_in, d_out]),
            self.device,
        );
        Ok(Linear {
            weight: Param::from_tensor(weight),
            bias: None,
        })
    }

    fn norm(&mut self, name: &str, d: usize, eps: f64) -> Result<RmsNorm, String> {
        Ok(RmsNorm {
            gamma: self.vector(name, d)?,
            epsilon: eps,
        })
    }
}

impl TransformerConfig {
    /// Builds the model on `device` from named weights (see [`Transformer::named_weights`]) instead of a
    /// random initialisation.
    pub fn from_weights(
        &self,
        source: &mut dyn WeightSource,
        device: &Device,
    ) -> Result<Transformer, String> {
        let s = &self.shape;
        let (d, ff, vocab) = (s.d_model as usize, s.d_ff as usize, s.vocab as usize);
        let (n_heads, n_kv_heads) = (s.n_heads as usize, s.n_kv_heads as usize);
        let head_dim = d / n_heads;
        let eps = self.norm_eps;
        let mut r = Reader { source, device };
        let embed = r.source.tensor("model.embed_tokens.weight", &[vocab, d])?;
        let embed = Embedding {
            weight: Param::from_tensor(Tensor::from_data(
                TensorData::new(embed, [vocab, d]),
                device,
            )),
        };
        let mut blocks = Vec::with_capacity(s.n_layers as usize);
        for i in 0..s.n_layers as usize {
            let p = |rest: &str| format!("model.layers.{i}.{rest}");
            let attn_norm = r.norm(&p("input_layernorm.weight"), d, eps)?;
            let attn = Attention {
                wq: r.linear(&p("self_attn.q_proj.weight"), n_heads * head_dim, d)?,
                wk: r.linear(&p("self_attn.k_proj.weight"), n_kv_heads * head_dim, d)?,
                wv: r.linear(&p("self_attn.v_proj.weight"), n_kv_heads * head_dim, d)?,
                wo: r.linear(&p("self_attn.o_proj.weight"), d, n_heads * head_dim)?,
                n_heads,
                n_kv_heads,
                head_dim,
            };
            let mlp_norm = r.norm(&p("post_attention_layernorm.weight"), d, eps)?;
            let mlp = Mlp {
                gate: r.linear(&p("mlp.gate_proj.weight"), ff, d)?,
                up: r.linear(&p("mlp.up_proj.weight"), ff, d)?,
                down: r.linear(&p("mlp.down_proj.weight"), d, ff)?,
            };
            blocks.push(Block {
                attn_norm,
                attn,
                mlp_norm,
                mlp,
            });
        }
        let norm = r.norm("model.norm.weight", d, eps)?;
        let head = if s.tie_embeddings {
            None
        } else {
            Some(r.linear("lm_head.weight", vocab, d)?)
        };
        let (rope_cos, rope_sin) = rope_tables(self.context, head_dim, self.rope_theta, device);
        Ok(Transformer {
            embed,
            blocks,
            norm,
            head,
            rope_cos,
            rope_sin,
        })
    }
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_to_vec::<f32>()
        .unwrap_or_default()
}

fn linear_out(name: String, linear: &Linear) -> NamedTensor {
    let [d_in, d_out] = linear.weight.val().dims();
    NamedTensor {
        name,
        shape: vec![d_out, d_in],
        data: transpose(&values(linear.weight.val()), d_in, d_out),
    }
}

fn vector_out(name: String, param: &Param<Tensor<1>>) -> NamedTensor {
    let data = values(param.val());
    NamedTensor {
        name,
        shape: vec![data.len()],
        data,
    }
}

impl Transformer {
    /// Every parameter under its Hugging Face name in PyTorch's layout, embeddings first, then
    /// each layer, then the final norm and head; a tied head is not listed (it is
    /// `model.embed_tokens.weight`).
    pub fn named_weights(&self) -> Vec<NamedTensor> {
        let [vocab, d] = self.embed.weight.val().dims();
        let mut out = vec![NamedTensor {
            name: "model.embed_tokens.weight".into(),
            shape: vec![vocab, d],
            data: values(self.embed.weight.val()),
        }];
        for (i, b) in self.blocks.iter().enumerate() {
            let p = |rest: &str| format!("model.layers.{i}.{rest}");
            out.push(vector_out(p("input_layernorm.weight"), &b.attn_norm.gamma));
            out.push(linear_out(p("self_attn.q_proj.weight"), &b.attn.wq));
            out.push(linear_out(p("self_attn.k_proj.weight"), &b.attn.wk));
            out.push(linear_out(p("self_attn.v_proj.weight"), &b.attn.wv));
            out.push(linear_out(p("self_attn.o_proj.weight"), &b.attn.wo));
            out.push(vector_out(
                p("post_attention_layernorm.weight"),
                &b.mlp_norm.gamma,
            ));
            out.push(linear_out(p("mlp.gate_proj.weight"), &b.mlp.gate));
            out.push(linear_out(p("mlp.up_proj.weight"), &b.mlp.up));
            out.push(linear_out(p("mlp.down_proj.weight"), &b.mlp.down));
        }
        out.push(vector_out("model.norm.weight".into(), &self.norm.gamma));
        if let Some(head) = &self.head {
            out.push(linear_out("lm_head.weight".into(), head));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::model::ModelShape;

    struct Map(HashMap<String, NamedTensor>);

    impl WeightSource for Map {
        fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
            let t = self.0.get(name).ok_or_else(|| format!("no `{name}`"))?;
            if t.shape != shape {
                return Err(format!("`{name}` has shape {:?}, not {shape:?}", t.shape));
            }
            Ok(t.data.clone())
        }
    }

    fn config(tied: bool) -> TransformerConfig {
        TransformerConfig {
            rope_theta: 500_000.0,
            norm_eps: 1e-6,
            ..TransformerConfig::new(
                ModelShape {
                    d_model: 32,
                    n_layers: 2,
                    n_heads: 4,
                    n_kv_heads: 2,
                    d_ff: 48,
                    vocab: 50,
                    tie_embeddings: tied,
                },
                16,
            )
        }
    }

    #[test]
    fn weights_round_trip_through_their_names_and_give_the_same_logits() {
        let device = Device::flex();
        for tied in [false, true] {
            let cfg = config(tied);
            device.seed(7);
            let model = cfg.init(&device);
            let named = model.named_weights();
            let listed: Vec<(String, Vec<usize>)> = named
                .iter()
                .map(|t| (t.name.clone(), t.shape.clone()))
                .collect();
            assert_eq!(listed, weight_names(&cfg));
            let total: usize = named.iter().map(|t| t.data.len()).sum();
            assert_eq!(total as u64, cfg.shape.params().total);
            let mut source = Map(named.into_iter().map(|t| (t.name.clone(), t)).collect());
            let back = cfg.from_weights(&mut source, &device).unwrap();
            let tokens = Tensor::<2, burn::tensor::Int>::from_data(
                TensorData::new((0..24i64).map(|i| i * 7 % 50).collect::<Vec<_>>(), [2, 12]),
                &device,
            );
            let a = values(model.forward(tokens.clone()));
            let b = values(back.forward(tokens));
            assert_eq!(a, b, "tied = {tied}");
        }
    }

    #[test]
    fn a_wrong_shape_is_named() {
        let device = Device::flex();
        let cfg = config(false);
        let model = cfg.init(&device);
        let mut map: HashMap<String, NamedTensor> = model
            .named_weights()
            .into_iter()
            .map(|t| (t.name.clone(), t))
            .collect();
        if let Some(t) = map.get_mut("model.layers.1.mlp.up_proj.weight") {
            t.shape = vec![32, 48];
        }
        let err = cfg.from_weights(&mut Map(map), &device).unwrap_err();
        assert!(err.contains("model.layers.1.mlp.up_proj.weight"), "{err}");
    }
}
