//! Bulk creates (`POST /contacts/bulk`, `POST /knowledgebase/{id}/references/bulk`): each item
//! is a single create's body, checked on its own so that a bad item fails alone (listed in
//! `failed` with the code and details the single create would answer) instead of failing the
//! request.

use std::marker::PhantomData;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use switchboard_api::contacts::BulkFailure;
use switchboard_api::errors::FieldError;
use switchboard_kit::{ErrorKind, FieldViolation};

use super::input::read_item;
use super::schema::inlined;

/// What a single create's body is called in a bulk request's schema.
pub trait BulkBody: JsonSchema + DeserializeOwned {
    /// The item's schema name, e.g. `BulkContact`.
    const ITEM: &'static str;
    /// The operation whose body an item is, e.g. `createContact`.
    const SINGLE: &'static str;
}

/// One item of a bulk create. Its schema takes any value, even one that is not an object, so
/// that validation of the whole request leaves every item to its own check; the item's schema
/// is named in `x-item-schema` for readers and generators.
pub struct BulkItem<T>(Value, PhantomData<T>);

impl<'de, T> Deserialize<'de> for BulkItem<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(|value| BulkItem(value, PhantomData))
    }
}

impl<T: BulkBody> JsonSchema for BulkItem<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::ITEM.into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let item = generator.subschema_for::<T>();
        let description = format!(
            "A {} body ({}), checked on its own: a bad item, even one that is not an object, is listed in `failed`.",
            T::SINGLE,
            T::schema_name()
        );
        json_schema!({ "description": description, "x-item-schema": item })
    }
}

/// The items of a bulk request that are well formed, with their positions in the request, and
/// the failures of the others.
pub struct Items<T> {
    pub parsed: Vec<T>,
    /// `positions[i]` is the request index of `parsed[i]`.
    positions: Vec<u32>,
    pub failed: Vec<BulkFailure>,
}

impl<T: BulkBody> Items<T> {
    pub fn read(items: Vec<BulkItem<T>>) -> Items<T> {
        let schema = inlined::<T>();
        let mut read = Items { parsed: Vec::new(), positions: Vec::new(), failed: Vec::new() };
        for (index, item) in items.into_iter().enumerate() {
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            match read_item::<T>(&schema, item.0) {
                Ok(parsed) => {
                    read.positions.push(index);
                    read.parsed.push(parsed);
                }
                Err(violations) => read.failed.push(invalid_item(index, &violations)),
            }
        }
        read
    }
}

impl<T> Items<T> {
    /// Every failure, in request order: these items' own, and the service's (whose indexes
    /// count only the items it was given).
    pub fn failures(mut self, service: Vec<switchboard_proto::v1::BulkFailure>) -> Vec<BulkFailure> {
        self.failed.extend(service.into_iter().map(|failure| {
            let position = usize::try_from(failure.index).ok().and_then(|i| self.positions.get(i).copied());
            BulkFailure {
                index: position.unwrap_or(failure.index),
                code: failure.code,
                error: failure.error,
                details: failure.details.into_iter().map(FieldError::from).collect(),
            }
        }));
        self.failed.sort_by_key(|failure| failure.index);
        self.failed
    }
}

fn invalid_item(index: u32, violations: &[FieldViolation]) -> BulkFailure {
    BulkFailure {
        index,
        code: ErrorKind::Validation.code().to_owned(),
        error: "Validation error".to_owned(),
        details: violations.iter().map(FieldError::from).collect(),
    }
}
