package redisstore

import "strings"

// jsonDict is DEFLATE's preset dictionary for stored bodies (RFC 1951 with
// a preset window, as zlib's deflateSetDictionary): member names and values
// that JSON APIs answer with again and again, so that even a 1 KiB answer,
// too short to repeat much of itself, can refer back to them. It is general
// vocabulary of REST APIs (errors and paging, people, addresses, money,
// owners and times, state words), not any one vendor's schema, and no
// fixture of the tests or the benchmark harness went into it
// (TestDictionaryIsGeneral checks it on four vendors' shapes; README.md,
// Measurements). The most common fragments come last,
// nearest to the data. It is part of the record layout: its bytes never
// change; a different dictionary needs another marker (dictMarker).
var jsonDict = []byte(strings.Join([]string{
	`"errors":[],"error":null,"message":"","code":"","details":[],"warnings":[]`,
	`"links":{"self":"https://","next":null,"prev":null},"next_cursor":"","cursor":null`,
	`"has_more":false,"page":1,"per_page":,"total":,"total_count":,"count":`,
	`"results":[],"items":[],"labels":[],"tags":[],"attributes":{},"properties":{},"settings":{}`,
	`"title":"","body":"","text":"","content":"","summary":"","notes":null,"comment":""`,
	`"first_name":"","last_name":"","full_name":"","display_name":"","username":"","login":""`,
	`"avatar_url":"https://","email":"","phone":"+1","verified":false`,
	`"address":{"line1":"","line2":null,"city":"","state":"","postal_code":"","zip":"","country":"US"}`,
	`"amount":,"currency":"usd","price":,"quantity":1,"total_amount":,"tax":,"discount":null`,
	`"customer":"","invoice":null,"order_id":"","account_id":"","user_id":"","parent_id":null`,
	`"project_id":"","team_id":"","channel":"","team":"","organization":"","project":""`,
	`"owner":{"id":"","type":"User"},"user":{"id":"","name":""},"author":null,"assignee":null`,
	`"created":,"updated":,"deleted_at":null,"expires_at":null,"timestamp":"","date":""`,
	`"created_at":"","updated_at":"","html_url":"https://","href":"https://","uri":""`,
	`"status":"active","status":"pending","status":"failed","status":"completed","status":"succeeded"`,
	`"state":"open","state":"closed","enabled":true,"active":true,"deleted":false,"archived":false`,
	`"version":1,"number":,"kind":"","format":"","source":"","reference":"","request_id":""`,
	`"ok":true,"success":true,"data":[],"metadata":{},"description":null,"url":"https://"`,
	`{"id":"","object":"","type":"","name":"","status":"","value":"`,
}, ","))
