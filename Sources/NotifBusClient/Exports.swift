// What `import NotifBusClient` brings along: the protocol module's value types (JSONValue,
// the limits, the wire names), so that a package depending on the NotifBusClient product
// alone needs no second import. Re-exports only; no code of its own.
@_exported import NotifBusProtocol
