//! Values that may be written once or as a list: `OneOrMany` (seeds) and `Axis` (a sweep axis,
//! which must not be empty because an empty axis would produce zero runs).

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{
    BoolDeserializer, F64Deserializer, I64Deserializer, MapAccessDeserializer, StrDeserializer,
    U64Deserializer,
};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

/// One value or a list of values; a list may not be empty.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OneOrMany<T>(pub Vec<T>);

/// A sweep axis: one value or a non-empty list of values, in the order written.
pub(crate) type Axis<T> = OneOrMany<T>;

impl<T> OneOrMany<T> {
    /// The values in the order written.
    pub fn values(&self) -> &[T] {
        &self.0
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(OneOrManyVisitor(PhantomData))
    }
}

struct OneOrManyVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for OneOrManyVisitor<T> {
    type Value = OneOrMany<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value or a non-empty list of values")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut values = Vec::new();
        while let Some(value) = seq.next_element()? {
            values.push(value);
        }
        if values.is_empty() {
            return Err(de::Error::custom(
                "empty list: an axis needs at least one value (an empty one would plan zero runs)",
            ));
        }
        Ok(OneOrMany(values))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(|v| OneOrMany(vec![v]))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        T::deserialize(StrDeserializer::<E>::new(v)).map(|v| OneOrMany(vec![v]))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        T::deserialize(I64Deserializer::<E>::new(v)).map(|v| OneOrMany(vec![v]))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        T::deserialize(U64Deserializer::<E>::new(v)).map(|v| OneOrMany(vec![v]))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        T::deserialize(F64Deserializer::<E>::new(v)).map(|v| OneOrMany(vec![v]))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        T::deserialize(BoolDeserializer::<E>::new(v)).map(|v| OneOrMany(vec![v]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Doc {
        x: Axis<u64>,
    }

    #[test]
    fn one_value_or_a_list() {
        let one: Doc = toml::from_str("x = 3").unwrap();
        assert_eq!(one.x.values(), &[3]);
        let many: Doc = toml::from_str("x = [1, 2]").unwrap();
        assert_eq!(many.x.values(), &[1, 2]);
    }

    #[test]
    fn empty_list_is_refused() {
        let err = toml::from_str::<Doc>("x = []").err().unwrap();
        assert!(err.message().contains("empty list"), "{err}");
    }
}
