// Public entry point of the notifbus JavaScript client: re-exports only, no logic.

export {
  Client,
  MethodChannel,
  connect,
  NEXT,
  STOP,
  complete,
  DEFAULT_TIMEOUT,
  HANDLER_ERROR_CODE,
  PROTOCOL_VERSION,
} from './client.js';
export {
  NotifBusError,
  BrokerError,
  MethodCallError,
  MissingPluginError,
  ConnectionLostError,
  RequestTimeoutError,
} from './errors.js';
export { FrameDecoder, FrameError, encodeFrame, decodeBody } from './framing.js';
export { resolveSocketPath } from './socketPath.js';
