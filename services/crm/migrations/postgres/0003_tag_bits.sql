-- Which tags a contact carries, as a 64-bit mask, so that a list filtered by tags can pass
-- over the contacts that lack one from its sort index alone, and probe the tag links only of
-- the others (see list_contacts in the store).
--
-- Each tag has one bit, chosen at random when the tag is created (tags may share a bit: the
-- test then lets through a few contacts that the probe turns away). A contact's `tag_bits`
-- is the OR of its tags' bits, rewritten by the store whenever its tags change; bits of a
-- tag that was deleted may stay, which costs a probe and loses nothing. Every bit set, the
-- column's default, is always safe: such a contact passes every test and is probed. SQLite has
-- no such column: its lists filter by the tag links alone.
ALTER TABLE tags ADD COLUMN bit_mask BIGINT NOT NULL DEFAULT (1::BIGINT << floor(random() * 64)::INT);
ALTER TABLE contacts ADD COLUMN tag_bits BIGINT NOT NULL DEFAULT -1;
UPDATE contacts c SET tag_bits = COALESCE(
    (SELECT bit_or(t.bit_mask) FROM contact_tags ct JOIN tags t ON t.id = ct.tag_id WHERE ct.contact_id = c.id), 0);

-- The sort indexes carry the bits, so that the walk along one reads no table rows.
DROP INDEX contacts_created;
DROP INDEX contacts_first_name;
DROP INDEX contacts_last_name;
DROP INDEX contacts_email;
DROP INDEX contacts_number;
CREATE INDEX contacts_created ON contacts (team_id, created_at, id) INCLUDE (tag_bits);
CREATE INDEX contacts_first_name ON contacts (team_id, first_name_key, id) INCLUDE (tag_bits);
CREATE INDEX contacts_last_name ON contacts (team_id, last_name_key, id) INCLUDE (tag_bits);
CREATE INDEX contacts_email ON contacts (team_id, email, id) INCLUDE (tag_bits);
CREATE INDEX contacts_number ON contacts (team_id, number, id) INCLUDE (tag_bits);
