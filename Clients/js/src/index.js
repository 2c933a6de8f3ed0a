// Public entry point of the notifbus JavaScript client: re-exports only, no logic (importing
// profile.js also gives Client its notification-profile methods).

export {
  Client,
  complete,
  connect,
  DEFAULT_TIMEOUT,
  HANDLER_ERROR_CODE,
  MethodChannel,
  NEXT,
  PROTOCOL_VERSION,
  STOP,
} from './client.js';
export {
  BrokerError,
  ConnectionLostError,
  MethodCallError,
  MissingPluginError,
  NotifBusError,
  RequestTimeoutError,
} from './errors.js';
export { decodeBody, encodeFrame, FrameDecoder, FrameError } from './framing.js';
export {
  ACTIVATION_WAIT,
  DEFAULT_ACTION_IDENTIFIER,
  DISMISS_ACTION_IDENTIFIER,
  HANDLED,
  LAUNCH_SLOT,
  PASS,
  PRESENTATION_OPTIONS,
  presentationOptions,
} from './profile.js';
export { resolveSocketPath } from './socketPath.js';
