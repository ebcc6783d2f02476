//! The envelopes of answers: `{data}`, `{data: [...]}`, `{data, message}` and
//! `{data: [...], pagination}`, with their JSON Schemas. Every answer schema is closed
//! (`additionalProperties: false`): a member the type does not declare cannot be sent.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;

/// `200 {data}`: one resource.
#[derive(Serialize)]
pub struct Data<T> {
    pub data: T,
}

impl<T> Data<T> {
    pub fn new(data: T) -> Self {
        Self { data }
    }
}

/// `200 {data: [...]}`: a list that is not paged.
#[derive(Serialize)]
pub struct List<T> {
    pub data: Vec<T>,
}

impl<T> List<T> {
    pub fn new(data: Vec<T>) -> Self {
        Self { data }
    }
}

/// `201 {data, message}`: a resource was created.
#[derive(Serialize)]
pub struct Created<T> {
    pub data: T,
    pub message: &'static str,
}

impl<T> Created<T> {
    pub fn new(data: T, message: &'static str) -> Self {
        Self { data, message }
    }
}

/// `200 {data, message}`: a resource was changed or deleted (`data` is it as it was then).
#[derive(Serialize)]
pub struct Updated<T> {
    pub data: T,
    pub message: &'static str,
}

impl<T> Updated<T> {
    pub fn new(data: T, message: &'static str) -> Self {
        Self { data, message }
    }
}

/// `202 {data, message}`: work was queued (`data` is it as queued).
#[derive(Serialize)]
pub struct Accepted<T> {
    pub data: T,
    pub message: &'static str,
}

impl<T> Accepted<T> {
    pub fn new(data: T, message: &'static str) -> Self {
        Self { data, message }
    }
}

/// Where a page lies in a paged list.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Pagination {
    /// The page returned, from 1.
    #[schemars(range(min = 1))]
    pub page: u32,
    /// Items per page.
    #[schemars(range(min = 1, max = 100))]
    pub limit: u32,
    /// Items in the whole list.
    pub total_count: u64,
    /// Pages in the whole list (0 when it is empty).
    pub total_pages: u32,
    /// Present, and true, only when `totalCount` is an estimate: on PostgreSQL a search that
    /// matches more than 1,000 items is counted that far and estimated beyond. A total of at
    /// most 1,000 is always exact.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schemars(default)]
    pub total_count_estimated: bool,
}

impl From<switchboard_proto::v1::PageInfo> for Pagination {
    fn from(page: switchboard_proto::v1::PageInfo) -> Self {
        Self {
            page: page.page,
            limit: page.limit,
            total_count: page.total_count,
            total_pages: page.total_pages,
            total_count_estimated: page.total_count_estimated,
        }
    }
}

/// `200 {data: [...], pagination}`: one page of a list.
#[derive(Serialize)]
pub struct Page<T> {
    pub data: Vec<T>,
    pub pagination: Pagination,
}

fn envelope(description: String, members: serde_json::Value, required: &[&str]) -> Schema {
    json_schema!({
        "type": "object",
        "description": description,
        "properties": members,
        "required": required,
        "additionalProperties": false,
    })
}

fn message_schema() -> serde_json::Value {
    serde_json::json!({ "type": "string", "description": "What was done, e.g. \"Agent created successfully\"." })
}

impl<T: JsonSchema> JsonSchema for Data<T> {
    fn schema_name() -> Cow<'static, str> {
        format!("{}Response", T::schema_name()).into()
    }

    fn schema_id() -> Cow<'static, str> {
        format!("switchboard::Data<{}>", T::schema_id()).into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let data = generator.subschema_for::<T>();
        envelope(format!("One {}.", T::schema_name()), serde_json::json!({ "data": data }), &["data"])
    }
}

impl<T: JsonSchema> JsonSchema for List<T> {
    fn schema_name() -> Cow<'static, str> {
        format!("{}ListResponse", T::schema_name()).into()
    }

    fn schema_id() -> Cow<'static, str> {
        format!("switchboard::List<{}>", T::schema_id()).into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let item = generator.subschema_for::<T>();
        let data = serde_json::json!({ "type": "array", "items": item });
        envelope(format!("A list of {} (not paged).", T::schema_name()), serde_json::json!({ "data": data }), &["data"])
    }
}

/// `Created` and `Updated` share one schema: they differ by status only.
fn written<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    let data = generator.subschema_for::<T>();
    envelope(
        format!("The {} after a write.", T::schema_name()),
        serde_json::json!({ "data": data, "message": message_schema() }),
        &["data", "message"],
    )
}

impl<T: JsonSchema> JsonSchema for Created<T> {
    fn schema_name() -> Cow<'static, str> {
        format!("{}WriteResponse", T::schema_name()).into()
    }

    fn schema_id() -> Cow<'static, str> {
        format!("switchboard::Written<{}>", T::schema_id()).into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        written::<T>(generator)
    }
}

/// `Updated` and `Accepted` answer the schema of `Created`: they differ by status only.
macro_rules! written_like_created {
    ($($answer:ident),*) => {$(
        impl<T: JsonSchema> JsonSchema for $answer<T> {
            fn schema_name() -> Cow<'static, str> {
                Created::<T>::schema_name()
            }

            fn schema_id() -> Cow<'static, str> {
                Created::<T>::schema_id()
            }

            fn json_schema(generator: &mut SchemaGenerator) -> Schema {
                written::<T>(generator)
            }
        }
    )*};
}

written_like_created!(Updated, Accepted);

impl<T: JsonSchema> JsonSchema for Page<T> {
    fn schema_name() -> Cow<'static, str> {
        format!("{}PageResponse", T::schema_name()).into()
    }

    fn schema_id() -> Cow<'static, str> {
        format!("switchboard::Page<{}>", T::schema_id()).into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let item = generator.subschema_for::<T>();
        let pagination = generator.subschema_for::<Pagination>();
        envelope(
            format!("One page of {}.", T::schema_name()),
            serde_json::json!({ "data": { "type": "array", "items": item }, "pagination": pagination }),
            &["data", "pagination"],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_estimated_total_is_flagged_and_an_exact_one_keeps_the_published_shape() {
        let page = |estimated| switchboard_proto::v1::PageInfo {
            page: 1,
            limit: 20,
            total_count: 1_500,
            total_pages: 75,
            total_count_estimated: estimated,
        };
        let exact = serde_json::to_value(Pagination::from(page(false))).unwrap();
        assert_eq!(exact, serde_json::json!({"page": 1, "limit": 20, "totalCount": 1500, "totalPages": 75}));
        let estimated = serde_json::to_value(Pagination::from(page(true))).unwrap();
        assert_eq!(estimated["totalCountEstimated"], true);
    }
}
