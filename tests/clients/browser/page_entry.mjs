// The browser bundle of the CORS page: the stock clients, as a page would
// import them. Built by install.sh with esbuild into dist/clients.js.
export { HttpAgent } from "@ag-ui/client";
export { io } from "socket.io-client";
