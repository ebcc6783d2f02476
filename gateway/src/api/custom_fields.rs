//! `/contacts/custom-fields`: the team's own contact fields (CRM service). A field's `name` is
//! the key of its value in a contact's `customFields`; values are checked against its type.

use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::custom_fields::{CustomField, FieldType};
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ServiceResult, limits};
use switchboard_proto::v1::{
    CreateCustomFieldRequest, CustomFieldRef, ListCustomFieldsRequest, OptionList, UpdateCustomFieldRequest,
};

use super::groups::CONTACTS;
use crate::call::Call;
use crate::endpoint::{Created, Endpoint, Id, Input, Json, List, Nothing, Updated};

const FIELD_GONE: &str = "Custom field not found";

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/contacts/custom-fields", list)
            .doc("listCustomFields", CONTACTS, "The team's custom contact fields")
            .lists("fieldId")
            .about("Oldest first; not paged."),
        Endpoint::post("/v1/contacts/custom-fields", create)
            .audited(AuditAction::CustomFieldCreated)
            .doc("createCustomField", CONTACTS, "Define a custom contact field")
            .creates("fieldId")
            .about(
                "`name` is the key of the value in a contact's `customFields`; it is unique in the team \
                 regardless of case. Values must match `type`: `text` a string, `number` a number, `date` a \
                 date `YYYY-MM-DD`, `boolean` true or false, `select` one of `options` (required for a select, \
                 refused for the other types). A `required` field must be given when a contact is created. \
                 A team has at most 100 fields.",
            )
            .fails(409, "A custom field with this name already exists, or the team has 100 fields."),
        Endpoint::put("/v1/contacts/custom-fields/{fieldId}", update)
            .audited(AuditAction::CustomFieldUpdated)
            .doc("updateCustomField", CONTACTS, "Change a custom field's label, requirement or options")
            .about(
                "Members left out keep their value. `name` and `type` cannot change (delete the field and \
                 create another). Options of a select may change; contacts keep the values they have.",
            )
            .fails(404, FIELD_GONE),
        Endpoint::delete("/v1/contacts/custom-fields/{fieldId}", delete)
            .audited(AuditAction::CustomFieldDeleted)
            .doc("deleteCustomField", CONTACTS, "Delete a custom field and its values on every contact")
            .fails(404, FIELD_GONE),
    ]
}

/// A custom field's id in the path.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldPath {
    pub field_id: Id,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct CreateCustomField {
    /// A letter, then letters, digits or `_`; unique in the team regardless of case.
    #[schemars(length(min = limits::FIELD_NAME.min, max = limits::FIELD_NAME.max))]
    #[schemars(extend("pattern" = limits::FIELD_NAME_PATTERN))]
    pub name: String,
    /// What people read.
    #[schemars(length(min = limits::FIELD_LABEL.min, max = limits::FIELD_LABEL.max))]
    pub label: String,
    #[serde(rename = "type")]
    pub kind: FieldType,
    /// Whether a new contact must have a value. Default false.
    pub required: Option<bool>,
    /// The choices of a `select` (required for it, refused for other types).
    #[schemars(length(min = limits::FIELD_OPTIONS.min, max = limits::FIELD_OPTIONS.max))]
    pub options: Option<Vec<FieldOption>>,
}

/// A choice of a select field.
#[derive(Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct FieldOption(#[schemars(length(min = limits::FIELD_OPTION.min, max = limits::FIELD_OPTION.max))] pub String);

/// A partial update: members left out (or null) keep their value. Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct UpdateCustomField {
    #[schemars(length(min = limits::FIELD_LABEL.min, max = limits::FIELD_LABEL.max))]
    pub label: Option<String>,
    pub required: Option<bool>,
    /// The new choices of a `select` (refused for other types).
    #[schemars(length(min = limits::FIELD_OPTIONS.min, max = limits::FIELD_OPTIONS.max))]
    pub options: Option<Vec<FieldOption>>,
}

fn field_ref(call: &Call, path: &FieldPath) -> CustomFieldRef {
    CustomFieldRef { team_id: call.team_id().to_owned(), field_id: path.field_id.to_string() }
}

fn options(given: Vec<FieldOption>) -> Vec<String> {
    given.into_iter().map(|option| option.0).collect()
}

async fn list(call: Call, _: Input) -> ServiceResult<List<CustomField>> {
    let request = ListCustomFieldsRequest { team_id: call.team_id().to_owned() };
    let fields = call.services.crm.clone().list_custom_fields(request).await?.into_inner().fields;
    Ok(List::new(fields.iter().map(CustomField::from).collect()))
}

async fn create(
    call: Call,
    input: Input<Nothing, Nothing, Json<CreateCustomField>>,
) -> ServiceResult<Created<CustomField>> {
    let body = input.body.0;
    let request = CreateCustomFieldRequest {
        team_id: call.team_id().to_owned(),
        name: body.name,
        label: body.label,
        r#type: body.kind.as_str().to_owned(),
        required: body.required.unwrap_or(false),
        options: body.options.map(options).unwrap_or_default(),
    };
    let field = call.services.crm.clone().create_custom_field(request).await?.into_inner();
    Ok(Created::new(CustomField::from(&field), "Custom field created successfully"))
}

async fn update(
    call: Call,
    input: Input<FieldPath, Nothing, Json<UpdateCustomField>>,
) -> ServiceResult<Updated<CustomField>> {
    let body = input.body.0;
    let request = UpdateCustomFieldRequest {
        team_id: call.team_id().to_owned(),
        field_id: input.path.field_id.into_string(),
        label: body.label,
        required: body.required,
        options: body.options.map(|given| OptionList { options: options(given) }),
    };
    let field = call.services.crm.clone().update_custom_field(request).await?.into_inner();
    Ok(Updated::new(CustomField::from(&field), "Custom field updated successfully"))
}

async fn delete(call: Call, input: Input<FieldPath>) -> ServiceResult<Updated<CustomField>> {
    let field = call.services.crm.clone().delete_custom_field(field_ref(&call, &input.path)).await?.into_inner();
    Ok(Updated::new(CustomField::from(&field), "Custom field deleted successfully"))
}
