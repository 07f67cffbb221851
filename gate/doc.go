// Package gate decides whether a snapshot may be published: it compares
// what readers have with what a write would put in its place, district by
// district and field by field, and judges the differences by the rules of
// DESIGN §10 (count, removed, value, month-end closing). It is pure logic:
// the writer and the CLI read Firestore and feed it rows; `snapwriter diff`
// prints its Report.
//
// # Rows and fields
//
// A district is a Row: its document's data (root "data") and its row of
// the all-districts rankings (root "rankings"). A field is named by its
// object keys from the root, array steps left out, so the policy classes
// every club row's "Mem. Base" with one pattern.
//
// # The default policy
//
// default-policy.json (printed by Policy.MarshalJSON) classes every field
// model.Generate produces, from the application's field names:
//   - volatile: calculatedAt, csvFetchedAt, fromCache and the version
//     stamps (schemaVersion, calculationVersion, rankingVersion): they
//     change with every computation and say nothing of the district.
//   - identity: ids and names (districtId, districtName, clubId, clubName,
//     Club Number, Club Name, District, Division, Area), region, asOfDate,
//     the element keys of education's byType and byMonth (type, month: a
//     changed one is another row, not a moved count), the year's bases (Mem.
//     Base, Club Base, Paid Club Base, Payment Base, paidClubBase) and
//     data/goals, the year's goals, set once for the year.
//   - counter: the counts of membership, clubs, education and the
//     dashboard rows (total, active, …, Active Members, Paid Clubs, Total
//     YTD Payments, paidClubs, totalPayments, distinguishedClubs). Bare
//     names, because the same count appears at several depths.
//   - plan: the club plan's booleans (CSP, cspSubmitted, Oct. Ren., Apr.
//     Ren.): none in generated data; they only go false → true as clubs
//     file.
//   - derived: percentages, ranks, scores and statuses (changePercent,
//     *GrowthPercent, *Rank, aggregateScore, "% … Growth", "… Status"),
//     data/ranking whole (the district's ranks, recomputed from everyone's
//     counts), and data/education/topClubs whole (a list chosen from the
//     counts: it reorders and swaps members when they move).
//
// Arrays of objects are matched by the first of the policy's arrayKeys that
// identifies every element on both sides: Club Number for dashboard club
// rows, clubId for membership.byClub, Division+Area, Division, District,
// districtId, type (education.byType) and month.
//
// # Decisions where the issue was silent
//
//   - In the closing period a field that appears or disappears holds even
//     when its class is derived: the rule reconciles numbers, not shapes.
//   - AllowValueChanges also lets through what the closing rule would
//     hold; the snapshot then did not pass by the closing rule alone, so
//     PassedByClosingRule is false and no deltas are recorded.
//   - Integers and doubles of the same value are equal everywhere,
//     inside arrays too (fingerprints write whole doubles as integers).
//   - A district whose only changes are derived (ignored) is still listed
//     as changed: diff shows it, the closing rule lets it through.
package gate
