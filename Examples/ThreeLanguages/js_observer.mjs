// The JavaScript link of the ThreeLanguages chain: observes willPresent at priority 30 with
// Clients/js, prints what it saw and completes the event with the presentation options.
// It is the chain's last word; it must not pass the event on.
import { parseArgs } from 'node:util';
import { complete, connect } from '../../Clients/js/src/index.js';

const { values: options } = parseArgs({
  options: {
    priority: { type: 'string', default: '30' },
    'run-for': { type: 'string', default: '60' },
    present: { type: 'string', default: '["banner","sound"]' },
  },
});
const priority = Number.parseInt(options.priority, 10);
const runForMs = Number.parseFloat(options['run-for']) * 1000;
const presentation = JSON.parse(options.present);
if (!Number.isInteger(priority) || !(runForMs > 0) || !Array.isArray(presentation)) {
  console.error('js_observer.mjs: usage: [--priority N] [--run-for SECONDS] [--present JSON-ARRAY]');
  process.exit(2);
}

const bus = await connect({ name: 'js-observer' });
let closing = false;
const close = async (why) => {
  closing = true;
  console.log(`js observer: closing (${why})`);
  await bus.close();
  process.exit(0);
};
bus.on('close', () => {
  if (closing) return;
  console.error('js_observer.mjs: the connection to the broker was lost');
  process.exit(1);
});
process.on('SIGTERM', () => close('SIGTERM'));
process.on('SIGINT', () => close('SIGINT'));
setTimeout(() => close('--run-for has passed'), runForMs).unref();

const observer = await bus.addObserver(
  'willPresent',
  ({ name, event, observer: id, payload }) => {
    const content = payload?.notification?.content ?? {};
    console.log(
      `js observer ${id} saw ${name} event ${event}: title ${JSON.stringify(content.title ?? null)}, ` +
        `thread ${JSON.stringify(content.threadIdentifier ?? null)}; completing with ${JSON.stringify(presentation)}`,
    );
    return complete(presentation);
  },
  { priority },
);
console.log(`js observer ${observer} on willPresent at priority ${priority}`);
