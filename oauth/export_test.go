package oauth

// DocumentClient is documentClient, for the tests.
var DocumentClient = documentClient
