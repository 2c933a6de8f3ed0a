// Public entry point of the notifbus JavaScript client: re-exports only, no logic (importing
// profile.js also gives Client its notification-profile methods).

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
export {
  ACTIVATION_WAIT,
  DEFAULT_ACTION_IDENTIFIER,
  DISMISS_ACTION_IDENTIFIER,
  LAUNCH_SLOT,
  PRESENTATION_OPTIONS,
  HANDLED,
  PASS,
  presentationOptions,
} from './profile.js';
