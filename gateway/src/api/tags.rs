//! `/tags`: the labels a team puts on its contacts (CRM service). Names are unique in the team
//! regardless of case.

use schemars::JsonSchema;
use serde::Deserialize;
use switchboard_api::tags::Tag;
use switchboard_kit::vocabulary::AuditAction;
use switchboard_kit::{ServiceResult, limits};
use switchboard_proto::v1::{CreateTagRequest, ListTagsRequest, TagRef, UpdateTagRequest};

use super::groups::TAGS;
use crate::call::Call;
use crate::endpoint::{Created, Endpoint, Id, Input, Json, List, Nothing, Updated};

const TAG_GONE: &str = "Tag not found";
const TAG_TAKEN: &str = "A tag with this name already exists (names are compared regardless of case).";

pub fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint::get("/v1/tags", list)
            .doc("listTags", TAGS, "The team's tags, by name")
            .lists("tagId")
            .about("Every tag of the team, sorted by name; not paged."),
        Endpoint::post("/v1/tags", create)
            .audited(AuditAction::TagCreated)
            .doc("createTag", TAGS, "Create a tag")
            .creates("tagId")
            .about("Without `color`, the tag is grey (`#6B7280`).")
            .fails(409, TAG_TAKEN),
        Endpoint::put("/v1/tags/{tagId}", update)
            .audited(AuditAction::TagUpdated)
            .doc("updateTag", TAGS, "Rename or recolour a tag")
            .about("Members left out keep their value; the contacts carrying the tag keep it.")
            .fails(404, TAG_GONE)
            .fails(409, TAG_TAKEN),
        Endpoint::delete("/v1/tags/{tagId}", delete)
            .audited(AuditAction::TagDeleted)
            .doc("deleteTag", TAGS, "Delete a tag; it is taken off its contacts")
            .fails(404, TAG_GONE),
    ]
}

/// A tag's id in the path.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TagPath {
    pub tag_id: Id,
}

/// Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct CreateTag {
    /// Unique in the team regardless of case.
    #[schemars(length(min = limits::TAG_NAME.min, max = limits::TAG_NAME.max))]
    pub name: String,
    /// `#RRGGBB`; absent or null: `#6B7280`.
    #[schemars(extend("pattern" = limits::COLOR_PATTERN))]
    pub color: Option<String>,
}

/// A partial update: members left out (or null) keep their value. Other members are ignored.
#[derive(Deserialize, JsonSchema)]
pub struct UpdateTag {
    #[schemars(length(min = limits::TAG_NAME.min, max = limits::TAG_NAME.max))]
    pub name: Option<String>,
    /// `#RRGGBB`.
    #[schemars(extend("pattern" = limits::COLOR_PATTERN))]
    pub color: Option<String>,
}

fn tag_ref(call: &Call, path: &TagPath) -> TagRef {
    TagRef { team_id: call.team_id().to_owned(), tag_id: path.tag_id.to_string() }
}

async fn list(call: Call, _: Input) -> ServiceResult<List<Tag>> {
    let request = ListTagsRequest { team_id: call.team_id().to_owned() };
    let tags = call.services.crm.clone().list_tags(request).await?.into_inner().tags;
    Ok(List::new(tags.iter().map(Tag::from).collect()))
}

async fn create(call: Call, input: Input<Nothing, Nothing, Json<CreateTag>>) -> ServiceResult<Created<Tag>> {
    let body = input.body.0;
    let request =
        CreateTagRequest { team_id: call.team_id().to_owned(), name: body.name, color: body.color.unwrap_or_default() };
    let tag = call.services.crm.clone().create_tag(request).await?.into_inner();
    Ok(Created::new(Tag::from(&tag), "Tag created successfully"))
}

async fn update(call: Call, input: Input<TagPath, Nothing, Json<UpdateTag>>) -> ServiceResult<Updated<Tag>> {
    let body = input.body.0;
    let request = UpdateTagRequest {
        team_id: call.team_id().to_owned(),
        tag_id: input.path.tag_id.into_string(),
        name: body.name,
        color: body.color,
    };
    let tag = call.services.crm.clone().update_tag(request).await?.into_inner();
    Ok(Updated::new(Tag::from(&tag), "Tag updated successfully"))
}

async fn delete(call: Call, input: Input<TagPath>) -> ServiceResult<Updated<Tag>> {
    let tag = call.services.crm.clone().delete_tag(tag_ref(&call, &input.path)).await?.into_inner();
    Ok(Updated::new(Tag::from(&tag), "Tag deleted successfully"))
}
